"""The requests a run finished: the most recent ones in memory, however long the run.

A watch left running for weeks finishes millions of requests; each one is already in the
results file (and the trace) the moment it finishes, so memory keeps only a bounded window of
the latest for the Finished pane, the detail view and the latency panel, and a count of all.
:class:`Finished` is that window as one snapshot sees it (frozen, like
:class:`~stepview.model.grow.Frozen`); the driver's :class:`FinishedLog` appends to it and lets
the oldest go, in batches (so a pane showing them sees rows appended, and only now and then
the oldest go), so a snapshot costs O(1) and memory stays within twice the bound.

``total`` counts every request ever finished, so a reader that saw ``total`` before can ask
for what finished since (:meth:`Finished.since`), as the trace encoder and the run insight do
after every step; ``len()`` and iteration give the ones kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Generic, TypeVar, overload

T = TypeVar("T")

KEEP_FINISHED = 10_000
"""Finished requests kept in memory by default (``--keep-finished``); older ones are in the
results file."""


class Finished(Sequence[T], Generic[T]):
    """The kept tail of everything finished so far: ``items[start:end]``, which is finished
    requests ``total - len(self)`` to ``total - 1`` of the run. Never changes once made."""

    __slots__ = ("_dropped", "_end", "_items", "_start")

    def __init__(
        self, items: list[T] | None = None, start: int = 0, end: int | None = None, dropped: int = 0
    ) -> None:
        self._items: list[T] = items if items is not None else []
        self._start = start
        self._end = len(self._items) if end is None else end
        self._dropped = dropped  # finished before items[0], no longer held

    @property
    def total(self) -> int:
        """Every request finished so far, kept or not."""
        return self._dropped + self._end

    @property
    def older(self) -> int:
        """Finished requests no longer kept (in the results file only)."""
        return self._dropped + self._start

    def since(self, total: int) -> Sequence[T]:
        """What finished after the first ``total`` (as many as are still kept)."""
        return self._items[max(total - self._dropped, self._start) : self._end]

    def __len__(self) -> int:
        return self._end - self._start

    def __iter__(self) -> Iterator[T]:
        return islice(self._items, self._start, self._end)

    def __reversed__(self) -> Iterator[T]:
        items, start = self._items, self._start
        return (items[i] for i in range(self._end - 1, start - 1, -1))

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return [self._items[self._start + i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._items[self._start + index]

    def extends(self, other: Finished[T]) -> bool:
        """True when this one is ``other`` plus what finished since (one log, not fewer)."""
        return self._items is other._items and self.total >= other.total

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Finished({list(self)!r}, total={self.total})"


class FinishedLog(Generic[T]):
    """The driver-side owner: appends, keeps the latest, hands out :class:`Finished`.

    The list only grows until it holds twice ``keep``; then the latest ``keep`` move to a new
    list (O(keep), once every ``keep`` appends) and the old list lives on only in the snapshots
    that still show it.
    """

    __slots__ = ("_dropped", "_items", "_keep", "_view")

    def __init__(self, keep: int = KEEP_FINISHED) -> None:
        self._keep = max(1, keep)
        self._items: list[T] = []
        self._dropped = 0
        self._view: Finished[T] = Finished(self._items)

    def append(self, item: T) -> None:
        items = self._items
        items.append(item)
        if len(items) >= 2 * self._keep:
            cut = len(items) - self._keep
            self._items = items[cut:]
            self._dropped += cut

    def __len__(self) -> int:
        """Every item appended so far."""
        return self._dropped + len(self._items)

    def view(self) -> Finished[T]:
        """The latest ``keep`` to ``2 * keep`` (reused while nothing was appended)."""
        items, view = self._items, self._view
        if view._items is not items or view._end != len(items):
            self._view = Finished(items, 0, len(items), self._dropped)
        return self._view


def total_of(finished: Sequence[T]) -> int:
    """Every request finished so far in ``finished`` (a :class:`Finished` window, or any
    sequence that holds them all: a replayed trace's, a test's)."""
    return finished.total if isinstance(finished, Finished) else len(finished)


def since(finished: Sequence[T], total: int) -> Sequence[T]:
    """What finished after the first ``total`` (see :func:`total_of`)."""
    return finished.since(total) if isinstance(finished, Finished) else finished[total:]
