"""Looking back in a live run: the history keys pin a past snapshot, the engine runs on.

The driver tests run the real :class:`Driver` on the fake engine, so "the panes show step N"
is checked against the very snapshot the driver kept for step N. The others use a source
holding the committed recorded run, where every snapshot is known in advance.
"""

from __future__ import annotations

import re
from dataclasses import replace

from textual.widgets import Input

from stepview.engine.driver.loop import Driver
from stepview.model.commands import AddRequest, Pause, Resume
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.testing.fake_engine import FakeEngine
from stepview.testing.scenes import history_app, until
from stepview.testing.sources import HistorySource
from stepview.ui.app import StepviewApp
from stepview.ui.detail.screen import DetailScreen
from stepview.ui.main.loading import ErrorScreen
from stepview.ui.main.request_table import RequestTable
from tests.ui.replay_trace import recorded_run

SIZE = (80, 24)


def status_text(app: StepviewApp) -> str:
    return str(app.query_one("#status").render())


def newest_pulled(app: StepviewApp) -> int:
    """The newest step the view has pulled, as its banner says (``HISTORY step S of N``)."""
    found = re.search(r"HISTORY step \d+ of (\d+)", status_text(app))
    assert found is not None, status_text(app)
    return int(found.group(1))


def pane_views(app: StepviewApp, pane: str) -> list[object]:
    table = app.query_one(f"#{pane}", RequestTable)
    return [table.row(i) for i in range(table.row_count)]


def assert_panes_show(app: StepviewApp, snapshot: StepSnapshot) -> None:
    """Every pane holds exactly ``snapshot``'s requests, in its order."""
    running = [v for v in snapshot.active if v.state.pane == "running"]
    pending = [v for v in snapshot.active if v.state.pane != "running"]
    assert pane_views(app, "running") == running
    assert pane_views(app, "pending") == pending
    assert pane_views(app, "finished") == list(snapshot.finished)


def live_driver() -> Driver:
    """A paused driver over a fake engine slow enough (20 ms a step) to outlast the test."""
    engine = FakeEngine(max_num_seqs=2, step_delay=0.02)
    return Driver(lambda phase: engine, start_paused=True, history_size=100_000)


async def test_back_shows_a_past_step_while_the_engine_runs_and_L_returns_to_live() -> None:
    driver = live_driver()
    app = StepviewApp(driver, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.latest().engine_state is EngineState.PAUSED)
        for i in range(3):
            driver.send(AddRequest(f"r{i}", "x" * 20, SamplingSpec(max_tokens=400)))
        driver.send(Resume())
        # The panes follow the driver on the app's tick: counting back starts from what they show.
        await until(pilot, lambda: app.shown is not None and app.shown.step >= 10)

        await pilot.press("left_square_bracket", "left_square_bracket", "left_square_bracket")
        pinned = app.shown
        assert pinned is not None and pinned is not driver.latest()
        assert pinned in driver.history()
        assert_panes_show(app, pinned)
        running = [v for v in pinned.active if v.state.pane == "running"]
        assert running and all(
            a is b for a, b in zip(pane_views(app, "running"), running, strict=True)
        )  # the driver's own objects, not copies
        assert app.has_class("-history")
        assert f"HISTORY step {pinned.step} of" in status_text(app)

        # Looking back did not pause the engine, and new steps do not replace the view.
        step = driver.latest().step
        await until(pilot, lambda: driver.latest().step >= step + 5)
        # The view has pulled those steps (the banner's "of N" moved on) and kept the old one.
        await until(pilot, lambda: newest_pulled(app) >= step + 5)
        assert app.shown is pinned
        assert driver.latest().engine_state is EngineState.RUNNING
        driver.send(Pause())
        await until(pilot, lambda: driver.latest().engine_state is EngineState.PAUSED)
        await until(pilot, lambda: f"of {driver.latest().step}" in status_text(app))

        await pilot.press("L")
        await until(pilot, lambda: app.shown is driver.latest())
        assert_panes_show(app, driver.latest())
        assert not app.has_class("-history")
        assert "HISTORY" not in status_text(app)
        await pilot.press("q")


async def test_keys_move_by_one_ten_to_the_oldest_and_forward_past_the_newest() -> None:
    app, source = history_app(recorded_run())
    history = source.snapshots
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("left_curly_bracket")
        assert app.shown is history[-11]
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert app.shown is history[-9]
        await pilot.press("less_than_sign")
        assert app.shown is history[0]
        assert app.screen.has_class("-starting")  # the run's first snapshot: start-up
        await pilot.press("right_curly_bracket")
        assert app.shown is history[10]
        assert_panes_show(app, history[10])
        await pilot.press(*["right_curly_bracket"] * 10)  # past the newest: live again
        assert app.shown is source.latest()
        assert not app.has_class("-history")


async def test_back_counts_from_the_step_on_screen_not_the_newest() -> None:
    steps = [StepSnapshot(i, i * 0.01, EngineState.RUNNING) for i in range(20)]
    source = HistorySource(steps)
    app = StepviewApp(source, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.shown is steps[-1])
        for step in range(20, 25):  # a fast engine runs ahead of the screen between ticks
            source.publish(StepSnapshot(step, step * 0.01, EngineState.RUNNING))
        app.action_older(1)  # before the next tick, as a key press may be
        assert app.shown is steps[-2]


async def test_go_to_a_step_number() -> None:
    app, source = history_app(recorded_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("colon", "1", "7", "enter")
        assert app.shown is not None and app.shown.step == 17
        first = next(s for s in source.snapshots if s.step >= 17)
        assert app.shown is first
        assert_panes_show(app, first)
        await pilot.press("colon", "escape")  # cancelled: nothing moves
        assert app.shown is first
        await pilot.press("colon", *"999", "enter")  # not reached yet: live
        assert app.shown is source.latest()


async def test_new_snapshots_move_the_banner_not_the_view() -> None:
    app, source = history_app(recorded_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("colon", "1", "7", "enter")
        pinned = app.shown
        last = source.latest()
        source.publish(replace(last, step=last.step + 1, clock=last.clock + 1))
        await until(pilot, lambda: f"of {last.step + 1}" in status_text(app))
        assert app.shown is pinned


async def test_detail_follows_the_history_and_says_so() -> None:
    app, _ = history_app(recorded_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("colon", "1", "7", "enter", "enter")  # detail of Running's first row
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        subtitle = str(screen.query_one("#detail-scroll").border_subtitle)
        assert subtitle == "HISTORY step 17 of 56 · L live"
        view = screen.view
        await pilot.press("left_square_bracket")
        assert app.shown is not None and screen.view is app.shown.find(screen.request_id)
        assert screen.view is not view
        await pilot.press("L")
        assert str(screen.query_one("#detail-scroll").border_subtitle) == ""


async def test_an_engine_failure_ends_the_look_back() -> None:
    app, source = history_app(recorded_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("left_square_bracket")
        last = source.latest()
        failed = replace(last, engine_state=EngineState.ERROR, phase="engine died")
        source.publish(failed)
        await until(pilot, lambda: isinstance(app.screen, ErrorScreen))
        assert app.shown is failed
        assert not app.has_class("-history")


async def test_history_keys_wait_for_the_first_step_and_forward_waits_for_a_look_back() -> None:
    app, _ = history_app(recorded_run())
    async with app.run_test(size=SIZE):
        assert app.check_action("newer", (1,)) is None  # live: nothing newer
        assert app.check_action("newest", ()) is None
        assert app.check_action("older", (1,)) is True
        assert app.check_action("speed", (True,)) is False  # a live engine has no speed


async def test_history_keys_are_text_in_the_filter_bar() -> None:
    app, _ = history_app(recorded_run())
    async with app.run_test(size=SIZE) as pilot:
        shown = app.shown
        await pilot.press("slash", "left_square_bracket", "L", "colon", "space", "plus")
        assert app.query_one("#filter", Input).value == "[L: +"
        assert app.shown is shown and not app.has_class("-history")
