"""Moving through a run's steps: one interface, one implementation for live runs, one for replays.

The history keys (back, forward, oldest, newest, go to a step) and pause mean the same in
both kinds of run, but work differently:

* :class:`LiveTimeline`: the engine runs on; the keys move a
  :class:`~stepview.ui.main.history_cursor.HistoryCursor` over the source's bounded
  ``history()`` and the app shows the pinned snapshot at once, marked as history, until ``L``
  returns to live;
* :class:`ReplayTimeline`: the keys become playback commands (``StepBack``, ``Seek``, …) for
  the replay thread, which moves ``latest()`` itself; the app's next poll shows it.

:func:`timeline_for` chooses one, once, from the source: this is the only place the UI tells
a replay from a live run. Everything else asks the timeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from stepview.model.commands import Command
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.model.source import SnapshotSource
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
from stepview.ui.main.history_cursor import HistoryCursor, HistorySource
from stepview.ui.scrub import HistoryMark, Mark, Mode, ReplayMark, next_speed


@runtime_checkable
class ReplayControls(Protocol):
    """A source that plays a recording: it reports where it is and takes playback commands.

    The part of :class:`~stepview.trace.replay.ReplaySource` the UI needs, declared here so
    the UI never imports the engine side.
    """

    @property
    def status(self) -> PlaybackStatus: ...

    def send(self, command: Command | PlaybackCommand) -> None: ...

    def history(self) -> Sequence[StepSnapshot]: ...


class Timeline(Protocol):
    """Where the app is in a run's steps, and how the history keys move it.

    A move returns the snapshot to show now, or ``None`` when the source moves ``latest()``
    itself (a replay) and the next poll shows where it went.
    """

    @property
    def mode(self) -> Mode:
        """Live, looking back at a live run, or replaying."""

    @property
    def ready(self) -> bool:
        """There is a step to move over (a live run: always; its engine state says more)."""

    def mark(self, pulled: StepSnapshot | None) -> Mark:
        """Where the shown snapshot is, for the status bar (``pulled``: the newest one)."""

    def follow(self, latest: StepSnapshot) -> StepSnapshot | None:
        """A new snapshot arrived: the pinned one to keep showing, or None to show ``latest``."""

    def paused(self, pulled: StepSnapshot | None) -> bool:
        """Whether the pause key should resume (``pulled``: the newest snapshot)."""

    def back(self, count: int, shown: StepSnapshot | None) -> StepSnapshot | None:
        """``count`` snapshots back from ``shown``, the snapshot on screen."""

    def forward(self, count: int) -> StepSnapshot | None:
        """``count`` snapshots forward; past the newest of a live run is live again."""

    def oldest(self) -> StepSnapshot | None:
        """The oldest snapshot kept (a replay: the first)."""

    def newest(self) -> StepSnapshot | None:
        """Live again (a replay: the last snapshot read)."""

    def seek(self, step: int) -> StepSnapshot | None:
        """The first snapshot published after engine step ``step``."""

    def change_speed(self, faster: bool) -> None:
        """Play faster or slower (a live engine has one speed: as fast as it can)."""


def timeline_for(source: SnapshotSource) -> Timeline:
    """The replay timeline for a source with playback controls, else the live one."""
    if isinstance(source, ReplayControls):
        return ReplayTimeline(source)
    return LiveTimeline(source)


class LiveTimeline:
    """A live run: the history keys pin past snapshots while the engine runs on."""

    def __init__(self, source: HistorySource) -> None:
        self._source = source
        self._cursor = HistoryCursor(source)

    @property
    def mode(self) -> Mode:
        return Mode.LIVE if self._cursor.live else Mode.HISTORY

    @property
    def ready(self) -> bool:
        return True

    def mark(self, pulled: StepSnapshot | None) -> Mark:
        if self._cursor.live:
            return None
        return HistoryMark(pulled.step if pulled is not None else 0)

    def follow(self, latest: StepSnapshot) -> StepSnapshot | None:
        if latest.engine_state is EngineState.ERROR:
            self._cursor.go_live()  # a failure is news: show it, wherever the user was
        return None if self._cursor.live else self._cursor.current()

    def paused(self, pulled: StepSnapshot | None) -> bool:
        return pulled is not None and pulled.engine_state is EngineState.PAUSED

    def back(self, count: int, shown: StepSnapshot | None) -> StepSnapshot:
        """Look back from the step on screen, not from the newest one.

        Live, the screen trails a fast engine by up to a timer tick (dozens of steps), and the
        cursor counts from the newest snapshot kept: pinning the shown step first makes ``[``
        land one step before what the user saw. ``jump`` pins the first snapshot of that step,
        which is the shown one while the engine runs (one snapshot per step).
        """
        cursor = self._cursor
        if cursor.live and shown is not None and shown is not self._source.latest():
            cursor.jump(shown.step)
        return cursor.back(count)

    def forward(self, count: int) -> StepSnapshot:
        return self._cursor.forward(count)

    def oldest(self) -> StepSnapshot:
        return self._cursor.oldest()

    def newest(self) -> StepSnapshot:
        return self._cursor.go_live()

    def seek(self, step: int) -> StepSnapshot:
        return self._cursor.jump(step)

    def change_speed(self, faster: bool) -> None:
        """Nothing to do: the key is hidden in a live run."""


class ReplayTimeline:
    """A replay: the history keys are playback commands for the replay thread."""

    def __init__(self, controls: ReplayControls) -> None:
        self._controls = controls
        self._speed: float | None = None  # last speed asked for; the status may lag behind
        self._last_step = (0, 0)  # (snapshots read, last step among them)

    @property
    def mode(self) -> Mode:
        return Mode.REPLAY

    @property
    def ready(self) -> bool:
        return bool(self._controls.status.count)

    def mark(self, pulled: StepSnapshot | None) -> Mark:
        status = self._controls.status
        count, last = self._last_step
        if status.count != count:  # the last step read moves only while the trace loads
            history = self._controls.history()
            last = history[-1].step if history else 0
            self._last_step = (status.count, last)
        return ReplayMark(status, last)

    def follow(self, latest: StepSnapshot) -> None:
        return None  # the replay thread moves latest() itself

    def paused(self, pulled: StepSnapshot | None) -> bool:
        return not self._controls.status.playing

    def back(self, count: int, shown: StepSnapshot | None) -> None:
        self._controls.send(StepBack(count))

    def forward(self, count: int) -> None:
        self._controls.send(StepForward(count))

    def oldest(self) -> None:
        self._controls.send(SeekStart())

    def newest(self) -> None:
        self._controls.send(SeekEnd())

    def seek(self, step: int) -> None:
        self._controls.send(Seek(step))

    def change_speed(self, faster: bool) -> None:
        current = self._speed if self._speed is not None else self._controls.status.speed
        self._speed = next_speed(current, faster)
        self._controls.send(SetSpeed(self._speed))
