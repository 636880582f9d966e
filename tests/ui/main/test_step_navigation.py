"""The UI's timeline without an app: chosen from the source, moved by hand.

A live timeline pins snapshots of the source's history and hands them back at once; a replay
timeline turns the same moves into playback commands and hands nothing back (the replay
thread moves ``latest()``). The pilot tests (test_history, test_replay) run both in the app.
"""

from __future__ import annotations

from dataclasses import replace

from stepview.engine.driver.loop import Driver
from stepview.model.commands import Command
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.testing.fake_engine import FakeEngine
from stepview.testing.snapshots import mid_run
from stepview.testing.sources import HistorySource, StaticSource
from stepview.trace.playback import (
    PlaybackCommand,
    PlaybackStatus,
    Seek,
    SeekEnd,
    SeekStart,
    SetSpeed,
    StepBack,
    StepForward,
)
from stepview.trace.replay import ReplaySource
from stepview.ui.main.step_navigation import LiveTimeline, ReplayTimeline, timeline_for
from stepview.ui.scrub import HistoryMark, Mode, ReplayMark
from tests.ui.replay_trace import TRACE


def steps(count: int) -> list[StepSnapshot]:
    return [StepSnapshot(i, i * 0.01, EngineState.RUNNING) for i in range(count)]


class Controls:
    """Playback controls that record the commands and report a status the test sets."""

    def __init__(self, status: PlaybackStatus, history: list[StepSnapshot]) -> None:
        self.status = status
        self.snapshots = history
        self.sent: list[Command | PlaybackCommand] = []

    def send(self, command: Command | PlaybackCommand) -> None:
        self.sent.append(command)

    def history(self) -> list[StepSnapshot]:
        return self.snapshots


def test_the_timeline_is_chosen_from_the_source() -> None:
    assert isinstance(timeline_for(ReplaySource(str(TRACE))), ReplayTimeline)
    assert isinstance(timeline_for(Driver(lambda phase: FakeEngine())), LiveTimeline)
    # A source that takes no requests is not a replay unless it has playback controls.
    assert isinstance(timeline_for(StaticSource(mid_run(), accepts_requests=False)), LiveTimeline)


def test_live_moves_pin_snapshots_and_forward_past_the_newest_is_live() -> None:
    history = steps(20)
    timeline = LiveTimeline(HistorySource(history))
    assert timeline.mode is Mode.LIVE and timeline.ready
    assert timeline.mark(history[-1]) is None
    assert timeline.back(3, history[-1]) is history[-4]
    assert timeline.mode is Mode.HISTORY
    assert timeline.mark(history[-1]) == HistoryMark(19)
    assert timeline.forward(1) is history[-3]
    assert timeline.oldest() is history[0]
    assert timeline.seek(7) is history[7]
    assert timeline.forward(100) is history[-1]
    assert timeline.mode is Mode.LIVE
    timeline.back(1, history[-1])
    assert timeline.newest() is history[-1] and timeline.mode is Mode.LIVE


def test_live_back_counts_from_the_step_on_screen() -> None:
    history = steps(20)
    source = HistorySource(history)
    timeline = LiveTimeline(source)
    for step in range(20, 25):  # the engine ran ahead of the screen
        source.publish(StepSnapshot(step, step * 0.01, EngineState.RUNNING))
    assert timeline.back(1, history[-1]) is history[-2]


def test_live_follow_keeps_the_pinned_snapshot_until_the_engine_fails() -> None:
    history = steps(10)
    source = HistorySource(history)
    timeline = LiveTimeline(source)
    assert timeline.follow(history[-1]) is None  # live: show the newest
    timeline.back(2, history[-1])
    newer = StepSnapshot(10, 0.1, EngineState.RUNNING)
    source.publish(newer)
    assert timeline.follow(newer) is history[-3]
    failed = replace(newer, engine_state=EngineState.ERROR, phase="engine died")
    source.publish(failed)
    assert timeline.follow(failed) is None and timeline.mode is Mode.LIVE


def test_live_pause_follows_the_newest_engine_state() -> None:
    timeline = LiveTimeline(HistorySource(steps(3)))
    assert timeline.paused(None) is False
    assert timeline.paused(StepSnapshot(3, 0.1, EngineState.PAUSED)) is True
    assert timeline.paused(StepSnapshot(3, 0.1, EngineState.RUNNING)) is False


def test_replay_moves_become_playback_commands() -> None:
    history = steps(30)
    status = PlaybackStatus(position=4, count=30, playing=False, speed=1.0, loaded=True)
    controls = Controls(status, history)
    timeline = ReplayTimeline(controls)
    assert timeline.mode is Mode.REPLAY and timeline.ready
    moves = [
        timeline.back(2, history[4]),
        timeline.forward(10),
        timeline.oldest(),
        timeline.newest(),
        timeline.seek(17),
        timeline.follow(history[9]),
    ]
    assert moves == [None] * 6  # the replay thread moves latest(), the app's poll shows it
    assert controls.sent == [StepBack(2), StepForward(10), SeekStart(), SeekEnd(), Seek(17)]
    assert timeline.paused(history[4]) is True
    controls.status = replace(status, playing=True)
    assert timeline.paused(history[4]) is False


def test_replay_speed_walks_the_ladder_from_the_last_speed_asked() -> None:
    status = PlaybackStatus(position=0, count=3, playing=True, speed=3.0, loaded=True)
    controls = Controls(status, steps(3))
    timeline = ReplayTimeline(controls)
    timeline.change_speed(faster=True)
    timeline.change_speed(faster=True)  # the status still says 3x: it lags behind
    timeline.change_speed(faster=False)
    assert controls.sent == [SetSpeed(4.0), SetSpeed(8.0), SetSpeed(4.0)]


def test_replay_mark_and_readiness_follow_the_loading_trace() -> None:
    empty = PlaybackStatus(position=0, count=0, playing=True, speed=1.0, loaded=False)
    controls = Controls(empty, [])
    timeline = ReplayTimeline(controls)
    assert not timeline.ready
    assert timeline.mark(None) == ReplayMark(empty, 0)
    controls.snapshots = steps(12)
    controls.status = replace(empty, count=12)
    assert timeline.ready
    mark = timeline.mark(None)
    assert isinstance(mark, ReplayMark) and mark.last_step == 11
    assert mark.position(5) == "5/11…"
