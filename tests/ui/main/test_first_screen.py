"""A newcomer's first screen, and a replay's footer (issue 13, case 11).

Once the engine had started, the three panes said "none" and nothing said what to do next.
In a replay the footer offered Add and Demo, which do nothing there.
"""

from __future__ import annotations

from stepview.engine.driver.loop import Driver
from stepview.model.snapshot import EngineState
from stepview.testing.fake_engine import FakeEngine
from stepview.testing.scenes import replay_app, until
from stepview.ui.app import StepviewApp
from stepview.ui.bindings import NEWCOMER_HINT, Over, action_enabled
from stepview.ui.main.request_table import RequestTable
from stepview.ui.scrub import Mode
from tests.ui.replay_trace import TRACE

SIZE = (80, 24)


def first_row(app: StepviewApp, pane: str) -> str:
    """The text of a pane's first line under its header."""
    return app.query_one(f"#{pane}", RequestTable).render_line(1).text.strip()


async def test_an_empty_live_run_says_what_to_do_until_the_first_request() -> None:
    engine = FakeEngine()
    app = StepviewApp(Driver(lambda phase: engine), clock=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(
            pilot, lambda: app.shown is not None and app.shown.engine_state is EngineState.IDLE
        )
        assert first_row(app, "pending") == NEWCOMER_HINT
        assert "press d for the demo prompts, a to add one, ? for help" in NEWCOMER_HINT
        assert len(NEWCOMER_HINT) <= 76  # one line in the pane at 80 columns
        assert first_row(app, "running") == "none" and first_row(app, "finished") == "none"
        await pilot.press("d")
        await until(pilot, lambda: app.shown is not None and len(app.shown.finished) == 3)
        await until(pilot, lambda: first_row(app, "pending") == "none")


async def test_a_replay_offers_no_add_or_demo_and_no_hint() -> None:
    app, source = replay_app(TRACE)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: source.status.count > 0 and app.shown is not None)
        await pilot.pause()
        shown = {b.binding.action for b in app.screen.active_bindings.values() if b.binding.show}
        assert "add" not in shown and "demo" not in shown
        assert {"pause", "step", "quit"} <= shown
        assert NEWCOMER_HINT not in first_row(app, "pending")


def test_add_and_demo_give_their_keys_to_read_only_where_nothing_can_be_added() -> None:
    def enabled(action: str, writable: bool, engine: EngineState = EngineState.IDLE) -> object:
        return action_enabled(
            action, over=Over.PANES, mode=Mode.LIVE, engine=engine, ready=True, writable=writable
        )

    assert [enabled(a, writable=False) for a in ("add", "demo", "read_only")] == [
        False,
        False,
        True,
    ]
    assert [enabled(a, writable=True) for a in ("add", "demo", "read_only")] == [True, True, False]
    # While the engine starts, Add is dimmed, and its key must not reach read_only's notice.
    assert enabled("read_only", writable=True, engine=EngineState.STARTING) is False
