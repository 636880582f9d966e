"""The scheduler-insight views on the preemption story (:mod:`stepview.testing.story`).

The timeline strip in a request's detail, the step view (``v``), the latency panel (``t``)
and the header's prefix-cache and preemption figures, driven by key presses as a user would,
live (a source that kept the story's history) and over the committed replay trace.
"""

from __future__ import annotations

from textual.widgets import Sparkline, Static

from stepview.model.snapshot import EngineState
from stepview.testing import scenes
from stepview.testing.sources import HistorySource
from stepview.testing.story import preemption_story
from stepview.ui.app import StepviewApp
from stepview.ui.bindings import Over, action_enabled
from stepview.ui.detail.screen import DetailScreen
from stepview.ui.main.status_bar import StatusBar
from stepview.ui.scrub import Mode
from stepview.ui.views.latency_view import LatencyScreen
from stepview.ui.views.step_view import StepScreen
from tests.ui.replay_trace import TRACE


def _text(app: StepviewApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def test_the_strip_shows_segments_chunks_and_the_preemption() -> None:
    app, _ = scenes.story_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await scenes.at_step(9, "enter")(pilot)
        assert isinstance(app.screen, DetailScreen)
        body = _text(app, "#detail-body")
        assert "prefill   steps 1-2" in body
        assert "96 prompt tok (64+32)" in body  # each prefill chunk
        assert "preempted steps 6-7" in body
        assert "99 computed tok lost, then kv_cache" in body
        assert "step 6 99 computed tok lost KV 56% → 31%" in body
        assert "finished at 0.102s" in body
        assert "history starts" not in body


async def test_choosing_a_segment_moves_the_history_to_its_first_step() -> None:
    app, _ = scenes.story_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await scenes.at_step(9, "enter")(pilot)
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        await pilot.press("comma", "comma")  # from the prefill holding step 9: decode 3-5
        await pilot.press("enter")
        await pilot.pause()
        assert app.shown is not None and app.shown.step == 3
        assert app.screen is screen  # still the detail, now of step 3
        assert "HISTORY step 3" in str(screen.query_one("#detail-scroll").border_subtitle)


async def test_the_strip_says_when_the_history_no_longer_reaches_the_start() -> None:
    app = StepviewApp(HistorySource(preemption_story()[5:]), clock=None)  # as if --history 7
    async with app.run_test(size=(100, 40)) as pilot:
        await scenes.at_step(9, "enter")(pilot)
        body = _text(app, "#detail-body")
        assert "history starts at step 5: earlier steps are gone (--history)" in body
        assert "preempted steps 6-7" in body


async def test_the_step_view_shows_budget_scheduled_preempted_admitted_and_waiting() -> None:
    app, _ = scenes.story_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await scenes.show_step_view(pilot)
        assert isinstance(app.screen, StepScreen)
        body = _text(app, "#step-body")
        assert "Step 6" in body and "41/64" in body
        assert "█ prefill 40  █ decode 1  ░ unused 23" in body
        assert "KV cache 31%  11 of 16 blocks free" in body
        assert "s3" in body and "40 tok" in body and "admitted" in body
        assert "Preempted s1" in body and "Admitted  s3" in body
        assert "Finished  none" in body
        assert "needs 3 more KV blocks, 1 free" in body
        await pilot.press("right_square_bracket")  # the history keys move it too
        await pilot.pause()
        body = _text(app, "#step-body")
        assert "Step 7" in body and "Finished  s2" in body and "Preempted none" in body
        await pilot.press("v")
        assert not isinstance(app.screen, StepScreen)


async def test_the_latency_panel_shows_percentiles_and_a_histogram() -> None:
    app, _ = scenes.story_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await scenes.show_latency(pilot)
        screen = app.screen
        assert isinstance(screen, LatencyScreen)
        table = _text(app, "#latency-table")
        assert "3 finished" in table and "last 64" in table
        for label in ("queue time", "TTFT", "inter-token", "end-to-end", "decode tok/s"):
            assert label in table
        assert "22ms" in table and "50ms" in table  # TTFT p50 and max
        assert "Histogram of TTFT" in _text(app, "#latency-caption")
        assert sum(screen.query_one(Sparkline).data or []) == 3
        await pilot.press("down")
        assert screen.metric == "itl"
        assert "Histogram of inter-token" in _text(app, "#latency-caption")
        await pilot.press("left_square_bracket", "left_square_bracket")  # back to step 9
        await pilot.pause()
        assert "1 finished" in _text(app, "#latency-table")


async def test_the_header_shows_the_prefix_hit_rate_and_the_steps_preemptions() -> None:
    app, _ = scenes.story_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await scenes.at_step(6)(pilot)
        line = str(app.query_one(StatusBar).render()).splitlines()[1]
        assert "hit 6%" in line and "pre 1" in line
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert "pre 0" in str(app.query_one(StatusBar).render()).splitlines()[1]


async def test_the_views_are_read_only_and_work_in_a_replay() -> None:
    app, _ = scenes.replay_app(TRACE)
    async with app.run_test(size=(80, 24)) as pilot:
        await scenes.at_step(17, "v")(pilot)
        assert isinstance(app.screen, StepScreen)
        assert "Step 17" in _text(app, "#step-body")
        await pilot.press("escape", "t")
        await pilot.pause()
        assert isinstance(app.screen, LatencyScreen)


def test_the_view_keys_apply_everywhere_but_over_a_form() -> None:
    for action in ("step_view", "latency"):
        for mode in Mode:
            for over in (Over.PANES, Over.DETAIL):
                assert action_enabled(
                    action, over=over, mode=mode, engine=EngineState.RUNNING, ready=True
                )
        assert not action_enabled(
            action, over=Over.MODAL, mode=Mode.LIVE, engine=EngineState.RUNNING, ready=True
        )
