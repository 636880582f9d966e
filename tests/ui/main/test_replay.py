"""Replay controls: keys become playback commands; the status bar says where playback is.

Every test plays the committed trace (``tests/data/replay.trace.jsonl``, 56 steps), paused at
the start, through a real :class:`ReplaySource` thread; the expected snapshots come from
reading the same file.
"""

from __future__ import annotations

import time
from pathlib import Path

from textual.pilot import Pilot

from stepview.testing.scenes import at_step, replay_app, until
from stepview.trace.reader import load_trace
from stepview.trace.replay import ReplaySource
from stepview.trace.store import TraceSnapshots
from stepview.ui.app import StepviewApp
from stepview.ui.dialogs.add_form import PromptForm
from stepview.ui.scrub import next_speed
from tests.ui.main.test_history import assert_panes_show, status_text
from tests.ui.replay_trace import TRACE

SIZE = (80, 24)
LAST_STEP = 56


def recorded() -> TraceSnapshots:
    return load_trace(TRACE).snapshots


def at(app: StepviewApp, source: ReplaySource, index: int) -> bool:
    """The replay is at snapshot ``index`` and the app shows it."""
    return source.status.position == index and app.shown is source.latest()


async def test_seek_step_back_and_forward() -> None:
    app, source = replay_app(TRACE)
    trace = recorded()
    async with app.run_test(size=SIZE) as pilot:
        await at_step(17)(pilot)
        index = trace.index_of_step(17)
        # The replay thread moves its snapshot before its status: wait for both.
        await until(pilot, lambda: at(app, source, index))
        assert_panes_show(app, trace[index])
        assert "step 17/56" in status_text(app)

        await pilot.press("right_square_bracket")
        await until(pilot, lambda: at(app, source, index + 1))
        await pilot.press("left_square_bracket", "left_square_bracket")
        await until(pilot, lambda: at(app, source, index - 1))
        assert_panes_show(app, trace[index - 1])
        await pilot.press("right_curly_bracket")
        await until(pilot, lambda: at(app, source, index + 9))
        await pilot.press("s")  # the live "step" key: one forward
        await until(pilot, lambda: at(app, source, index + 10))
        await pilot.press("left_curly_bracket")
        await until(pilot, lambda: at(app, source, index))

        await pilot.press("greater_than_sign")
        await until(pilot, lambda: at(app, source, len(trace) - 1))
        assert f"step {LAST_STEP}/{LAST_STEP}" in status_text(app)
        assert "STOPPED" in status_text(app)
        await pilot.press("less_than_sign")
        await until(pilot, lambda: at(app, source, 0))
        assert not source.status.playing


async def test_speed_keys_walk_the_ladder_and_show_in_the_status_bar() -> None:
    app, source = replay_app(TRACE)
    async with app.run_test(size=SIZE) as pilot:
        await at_step(17)(pilot)
        assert "‖ 1x" in status_text(app)
        await pilot.press("plus", "plus", "equals_sign")
        await until(pilot, lambda: source.status.speed == 8.0)
        await until(pilot, lambda: "‖ 8x" in status_text(app))
        await pilot.press(*["plus"] * 5)
        await until(pilot, lambda: "‖ 16x" in status_text(app))  # held at the top
        await pilot.press(*["minus"] * 10)
        await until(pilot, lambda: "‖ 0.25x" in status_text(app))  # held at the bottom
        assert source.status.speed == 0.25


class StoppableClock:
    """The monotonic clock, until :meth:`stop`: then time stands still for the player, until
    :meth:`run` (it goes on from where it stood)."""

    def __init__(self) -> None:
        self.stopped_at: float | None = None
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() - self.offset if self.stopped_at is None else self.stopped_at

    def stop(self) -> None:
        self.stopped_at = self()

    def run(self) -> None:
        if self.stopped_at is not None:
            self.offset = time.monotonic() - self.stopped_at
            self.stopped_at = None


async def rounds(pilot: Pilot[None], source: ReplaySource, count: int) -> None:
    """Let the player go round its loop ``count`` times: each round publishes a new status
    (the first may have been under way already)."""
    seen = [source.status]

    def moved_on() -> bool:
        if source.status is not seen[-1]:
            seen.append(source.status)
        return len(seen) > count

    await until(pilot, moved_on)


async def test_play_runs_to_the_end_and_pause_holds() -> None:
    clock = StoppableClock()
    app, source = replay_app(TRACE, clock)
    last = len(recorded()) - 1
    async with app.run_test(size=SIZE) as pilot:
        await at_step(17)(pilot)
        await pilot.press("space")
        await until(pilot, lambda: source.status.playing or source.status.position == last)
        await until(pilot, lambda: at(app, source, last))  # 40 ms of recording at 1x
        await until(pilot, lambda: not source.status.playing)  # a player stops at the end
        await until(
            pilot, lambda: f"‖ 1x  STOPPED  step {LAST_STEP}/{LAST_STEP}" in status_text(app)
        )

        # Play again, from the start, at 0.25x. The whole replay lasts 160 ms then, less than
        # a busy machine may take between two looks at the screen: time stops for the player
        # so that it is still playing when looked at.
        clock.stop()
        await pilot.press("minus", "minus", "p")
        await until(pilot, lambda: "▶ 0.25x" in status_text(app))
        await pilot.press("p")
        await until(pilot, lambda: not source.status.playing)
        held = source.status.position
        # Paused, the player holds although time moves again: looked at after it went round
        # (read the clock and found nothing due) twice since.
        clock.run()
        await rounds(pilot, source, 3)
        assert not source.status.playing and source.status.position == held
        await until(pilot, lambda: app.shown is source.latest() and "‖ 0.25x" in status_text(app))


async def test_adding_and_aborting_are_refused_with_a_notice() -> None:
    app, source = replay_app(TRACE)
    notices: list[str] = []
    app.notify = lambda message, **_: notices.append(message)  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await at_step(17)(pilot)
        await pilot.press("a", "d", "x")
        assert not isinstance(app.screen, PromptForm)
        assert len(notices) == 3 and all("replay" in n for n in notices)
        assert source.status.position == recorded().index_of_step(17)


async def test_a_damaged_trace_says_what_was_lost(tmp_path: Path) -> None:
    lines = TRACE.read_text(encoding="utf-8").splitlines(keepends=True)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("".join(lines[:40]) + lines[40][:25], encoding="utf-8")
    app, source = replay_app(str(damaged))
    notices: list[str] = []
    app.notify = lambda message, **_: notices.append(message)  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: source.status.warning is not None)
        warning = source.status.warning
        assert warning is not None and warning.startswith("line 41 is truncated")
        await until(pilot, lambda: "⚠ line 41 is truncated" in status_text(app))
        assert notices == [warning]  # once, in full
        await pilot.press("greater_than_sign")
        await until(pilot, lambda: at(app, source, source.status.count - 1))
        assert notices == [warning]


async def test_a_damaged_line_in_the_middle_is_skipped_and_the_rest_plays(tmp_path: Path) -> None:
    """Issue 13: replay used to stop at line 21 and silently drop the 35 steps after it."""
    lines = TRACE.read_text(encoding="utf-8").splitlines(keepends=True)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("".join([*lines[:20], "{garbage\n", *lines[20:]]), encoding="utf-8")
    app, source = replay_app(str(damaged))
    notices: list[str] = []
    app.notify = lambda message, **_: notices.append(message)  # type: ignore[method-assign]
    async with app.run_test(size=(120, 24)) as pilot:
        await until(pilot, lambda: source.status.warning is not None)
        await pilot.press("greater_than_sign")
        await until(pilot, lambda: at(app, source, len(recorded()) - 1))
        status = status_text(app)
        assert "⚠ line 21 is corrupt" in status and "skipped it, played the rest" in status
        assert f"step {LAST_STEP}/{LAST_STEP}" in status and "STOPPED" in status
        assert_panes_show(app, recorded()[-1])
        assert len(notices) == 1 and notices[0].startswith("line 21 is corrupt")


async def test_the_status_follows_the_keys_during_the_recorded_start_up() -> None:
    app, source = replay_app(TRACE)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.check_action("speed", (True,)) is True)
        assert source.latest().engine_state.value == "starting"  # snapshot 0: start-up
        await pilot.press("plus")
        await until(pilot, lambda: "REPLAY ‖ 2x  STARTING  step 0/56" in status_text(app))


def test_speed_ladder_from_an_off_ladder_speed() -> None:
    """``--replay-speed 3`` then ``+``/``-``: the nearest rung in that direction."""
    assert (next_speed(3.0, faster=True), next_speed(3.0, faster=False)) == (4.0, 2.0)
    assert (next_speed(16.0, faster=True), next_speed(0.25, faster=False)) == (16.0, 0.25)
