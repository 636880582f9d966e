"""Commands and status of a replayed trace, beside the live commands of ``model/commands.py``.

A replay also understands :class:`~stepview.model.commands.Pause`,
:class:`~stepview.model.commands.Resume` and :class:`~stepview.model.commands.SingleStep`
(one snapshot forward), so the keys that control the live engine control playback too; these
add what only a recording can do: go back, jump, change speed. Plain frozen values, like the
live commands, so the UI builds them without importing the replay thread's code
(:mod:`stepview.trace.replay`). :func:`check_speed` is the one rule for a replay speed, for
the command line's ``--replay-speed`` as for the ``+``/``-`` keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stepview.model.stacks import RecordedStacks


def check_speed(speed: float) -> float:
    """``speed`` as a float if it is a finite number above 0; else ``ValueError``."""
    if not (math.isfinite(speed) and speed > 0):
        raise ValueError(f"replay speed must be a positive number, got {speed!r}")
    return float(speed)


@dataclass(frozen=True, slots=True)
class Seek:
    """Jump to the first snapshot published after engine step ``step`` (clamped to the trace)."""

    step: int


@dataclass(frozen=True, slots=True)
class SeekStart:
    """Jump to the first snapshot."""


@dataclass(frozen=True, slots=True)
class SeekEnd:
    """Jump to the last snapshot read so far."""


@dataclass(frozen=True, slots=True)
class StepForward:
    """Pause, then move ``count`` snapshots forward."""

    count: int = 1


@dataclass(frozen=True, slots=True)
class StepBack:
    """Pause, then move ``count`` snapshots back."""

    count: int = 1


@dataclass(frozen=True, slots=True)
class SetSpeed:
    """Play at ``speed`` times the recorded pace (2.0 = twice as fast); see :func:`check_speed`."""

    speed: float


PlaybackCommand = Seek | SeekStart | SeekEnd | StepForward | StepBack | SetSpeed


@dataclass(frozen=True, slots=True)
class PlaybackStatus:
    """Where a replay is, for the status bar: ``▶ 2x  snapshot 41/812``."""

    position: int  # index of the snapshot shown
    count: int  # snapshots read so far
    playing: bool
    speed: float
    loaded: bool  # the whole trace has been read
    warning: str | None = None  # why reading stopped early (truncated or corrupt line)
    note: str | None = None  # what the trace is, when it is a part or a flight recording
    stacks: tuple[RecordedStacks, ...] = ()  # a flight recording's engine-core stacks, read so far

    @property
    def at_end(self) -> bool:
        """Showing the last snapshot of a fully read trace."""
        return self.loaded and self.position >= self.count - 1
