"""Where the shown snapshot sits in time: live, a past step of a live run, or a replay.

The panes always draw one snapshot (``StepviewApp.shown``); a *mark* says how to read it.
Live runs have none. Scrubbing back through a live run's bounded history gives a
:class:`HistoryMark`, and a replay a :class:`ReplayMark` built from the source's
:class:`~stepview.trace.playback.PlaybackStatus`. Marks are small frozen values compared by
equality, so the status bar and the detail view redraw only when what they say changed.
:class:`Mode` says the same in one word, for deciding which keys apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from stepview.trace.playback import PlaybackStatus

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
"""Replay speeds ``+`` and ``-`` move through: slow enough to read a step, fast enough to
skim a long run."""


class Mode(StrEnum):
    """How the shown snapshot relates to the run."""

    LIVE = "live"  # the newest snapshot of a live run
    HISTORY = "history"  # a past snapshot of a live run, pinned while the engine runs on
    REPLAY = "replay"  # a snapshot of a recording, wherever its playback is


def next_speed(speed: float, faster: bool) -> float:
    """The next speed of :data:`SPEEDS` above (or below) ``speed``, held at the ends.

    ``speed`` may be off the ladder (``--replay-speed 3``): the next step is the nearest rung
    in that direction.
    """
    if faster:
        return next((s for s in SPEEDS if s > speed), SPEEDS[-1])
    return next((s for s in reversed(SPEEDS) if s < speed), SPEEDS[0])


def speed_text(speed: float) -> str:
    """``0.25x``, ``1x``, ``16x``."""
    return f"{speed:g}x"


@dataclass(frozen=True, slots=True)
class HistoryMark:
    """The shown snapshot is a past one of a live run that has reached ``latest_step``."""

    latest_step: int


@dataclass(frozen=True, slots=True)
class ReplayMark:
    """The shown snapshot comes from a recording; ``last_step`` is the last step read so far."""

    status: PlaybackStatus
    last_step: int

    @property
    def symbol(self) -> str:
        """``▶`` playing, ``‖`` paused (the pause sign U+23F8 is missing from common
        monospace fonts, Fira Code and DejaVu Sans Mono among them)."""
        return "▶" if self.status.playing else "‖"

    def position(self, step: int) -> str:
        """``120/340`` for step 120, with ``…`` while the rest of the trace is being read."""
        more = "" if self.status.loaded else "…"
        return f"{step}/{self.last_step}{more}"


Mark = HistoryMark | ReplayMark | None


def mark_text(mark: Mark, step: int) -> str:
    """One line saying where snapshot ``step`` is, for views without the status bar."""
    if isinstance(mark, HistoryMark):
        return f"HISTORY step {step} of {mark.latest_step} · L live"
    if isinstance(mark, ReplayMark):
        return f"REPLAY {mark.symbol} {speed_text(mark.status.speed)} step {mark.position(step)}"
    return ""
