"""Looking back: a cursor for scrubbing through a live run's history.

:class:`HistoryCursor` is what the UI scrubs with. A source keeps a bounded history (the live
driver drops the oldest snapshots as new ones arrive; a replay holds the whole trace), so the
cursor pins the *snapshot object* the user chose, not an index that shifts under it, and falls
back to the oldest kept snapshot once its choice has been dropped.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Protocol

from stepview.model.recent import total_of
from stepview.model.snapshot import StepSnapshot


class HistorySource(Protocol):
    """The part of :class:`~stepview.model.source.SnapshotSource` a cursor reads."""

    def latest(self) -> StepSnapshot: ...

    def history(self) -> Sequence[StepSnapshot]: ...


class HistoryCursor:
    """Which snapshot the user is looking at: the live one, or one pinned in the history.

    Moving is by snapshot (one per published step, plus the ones a command published between
    steps); :meth:`jump` goes by step number. Moving forward past the newest kept snapshot
    returns to live. Every method reads the source's history afresh, so the cursor stays right
    while the driver keeps appending and dropping.

    Made for live sources, whose ``latest()`` is the end of their history. A replay moves
    with its own playback commands (``stepview.trace.playback``) instead.
    """

    def __init__(self, source: HistorySource) -> None:
        self._source = source
        self._pinned: StepSnapshot | None = None
        self._hint = 0  # where the pinned snapshot was last found (usually still is)

    @property
    def live(self) -> bool:
        """True while following the newest snapshot."""
        return self._pinned is None

    def current(self) -> StepSnapshot:
        """The snapshot to show: the pinned one (or the oldest kept, if it was dropped)."""
        if self._pinned is None:
            return self._source.latest()
        history = self._source.history()
        index = self._index(history)
        return history[index] if history else self._source.latest()

    def position(self) -> tuple[int, int] | None:
        """``(index, count)`` in the kept history, or ``None`` when live."""
        if self._pinned is None:
            return None
        history = self._source.history()
        return self._index(history), len(history)

    def back(self, count: int = 1) -> StepSnapshot:
        """Move ``count`` snapshots towards the oldest kept (leaving live mode)."""
        history = self._source.history()
        if not history:
            return self._source.latest()
        if self._pinned is None:
            # Live shows latest(), which is (or is about to be) the last of the history.
            start = len(history) - 1 if history[-1] is self._source.latest() else len(history)
        else:
            start = self._index(history)
        return self._pin(history, max(0, start - count))

    def forward(self, count: int = 1) -> StepSnapshot:
        """Move ``count`` snapshots towards the newest; going past the newest returns to live."""
        if self._pinned is None:
            return self._source.latest()
        history = self._source.history()
        target = self._index(history) + count
        if target >= len(history) - 1:
            return self.go_live()
        return self._pin(history, target)

    def oldest(self) -> StepSnapshot:
        """Jump to the oldest snapshot still kept."""
        history = self._source.history()
        if not history:
            return self._source.latest()
        return self._pin(history, 0)

    def jump(self, step: int) -> StepSnapshot:
        """Jump to the first snapshot published after engine step ``step`` (or the nearest kept).

        A step before the oldest kept lands on the oldest; a step not reached yet goes live.
        """
        history = self._source.history()
        if not history or step > history[-1].step:
            return self.go_live()
        index = bisect_left(history, step, key=lambda s: s.step)
        return self._pin(history, index)

    def go_live(self) -> StepSnapshot:
        """Follow the newest snapshot again."""
        self._pinned = None
        return self._source.latest()

    def _pin(self, history: Sequence[StepSnapshot], index: int) -> StepSnapshot:
        self._pinned = history[index]
        self._hint = index
        return history[index]

    def _index(self, history: Sequence[StepSnapshot]) -> int:
        """Where the pinned snapshot is now; re-pins to the oldest if it has been dropped."""
        pinned = self._pinned
        if pinned is None:
            return len(history) - 1
        if history and pinned.clock >= history[0].clock:
            hint = self._hint
            # Dropping from the front shifts it left; look from the old place backwards first.
            for index in range(min(hint, len(history) - 1), -1, -1):
                if _same(history[index], pinned):
                    self._hint = index
                    return index
            for index in range(hint + 1, len(history)):
                if _same(history[index], pinned):
                    self._hint = index
                    return index
        # Older than anything kept (clocks never go back): it was dropped.
        if history:
            self._pinned = history[0]
        self._hint = 0
        return 0


def _same(a: StepSnapshot, b: StepSnapshot) -> bool:
    """One published snapshot, even if a lazy sequence (a replayed trace) rebuilt the object."""
    return a is b or (
        a.step == b.step
        and a.clock == b.clock
        and a.engine_state is b.engine_state
        and len(a.active) == len(b.active)
        and total_of(a.finished) == total_of(b.finished)
    )
