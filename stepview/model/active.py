"""The requests not finished yet, as one snapshot sees them: immutable, built at O(changes).

A server in trouble holds thousands of waiting requests, and a snapshot per step must not copy
them all: most did not change. :class:`ActiveViews` is the snapshot's sequence of request views
in arrival order, kept in small chunks; the driver's :class:`ActiveBuilder` changes only the
chunks a step touched and hands each snapshot the tuple of chunk tuples, so building one costs
the views that changed plus one reference per chunk (``len / CHUNK``).

Two snapshots of one builder share every chunk that did not change, so what changed between
them is found by chunk identity (:func:`changed_between`) without looking at the others: the
run insight and the trace encoder, fed every snapshot, pay per step for the chunks the step
touched. Order only ever changes by removing a request or appending one (the ledger's arrival
order), which a reader of two snapshots can rely on.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate, chain
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from stepview.model.snapshot import RequestView

CHUNK = 32
"""Views per chunk: what a changed request costs to re-freeze, and the chunks' count per view."""

Chunk = tuple["RequestView", ...]


class ActiveViews(Sequence["RequestView"]):
    """The request views of one snapshot, in arrival order, as a tuple of chunk tuples.

    Made by an :class:`ActiveBuilder`, it also knows which chunks it has that the builder's
    previous one had not, and the other way round (``generation`` counts the builder's), so
    that what changed between two consecutive ones costs what changed.
    """

    __slots__ = ("_chunks", "_len", "_starts", "generation", "gone", "lineage", "new")

    def __init__(
        self,
        chunks: tuple[Chunk, ...] = (),
        *,
        lineage: object = None,
        generation: int = 0,
        new: tuple[Chunk, ...] = (),
        gone: tuple[Chunk, ...] = (),
    ) -> None:
        self._chunks = chunks
        self._len = sum(map(len, chunks))
        self._starts: list[int] | None = None  # where each chunk begins (on first index)
        self.lineage = lineage  # the builder that made it
        self.generation = generation
        self.new = new  # chunks the builder's previous one did not have
        self.gone = gone  # ... and chunks it had that this one has not

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        return self._chunks

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[RequestView]:
        return chain.from_iterable(self._chunks)

    @overload
    def __getitem__(self, index: int) -> RequestView: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[RequestView]: ...
    def __getitem__(self, index: int | slice) -> RequestView | Sequence[RequestView]:
        if isinstance(index, slice):
            return tuple(self)[index]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(index)
        starts = self._starts
        if starts is None:
            starts = self._starts = [0, *accumulate(map(len, self._chunks))]
        chunk = bisect_right(starts, index) - 1
        return self._chunks[chunk][index - starts[chunk]]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ActiveViews | tuple | list):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ActiveViews({list(self)!r})"


def changed_between(
    before: Sequence[RequestView], after: Sequence[RequestView]
) -> tuple[Iterable[RequestView], Iterable[RequestView]]:
    """The views of ``before`` and of ``after`` that may differ between the two: everything
    but the chunks both share, when both come from one builder (else every view of each).

    A view in the second part that is the same object as one in the first did not change; the
    caller's identity test sorts them out, over a few chunks instead of every request.
    """
    if not (isinstance(before, ActiveViews) and isinstance(after, ActiveViews)):
        return before, after
    if (
        after.lineage is not None
        and after.lineage is before.lineage
        and after.generation == before.generation + 1
    ):  # consecutive: the builder said what changed
        return chain.from_iterable(after.gone), chain.from_iterable(after.new)
    if after is before:
        return (), ()
    old = {id(chunk): chunk for chunk in before.chunks}
    new = {id(chunk): chunk for chunk in after.chunks}
    return (
        chain.from_iterable(c for key, c in old.items() if key not in new),
        chain.from_iterable(c for key, c in new.items() if key not in old),
    )


class _Block:
    """One chunk of the builder: its views, and its frozen tuple while it does not change."""

    __slots__ = ("frozen", "views")

    def __init__(self) -> None:
        self.views: list[RequestView] = []
        self.frozen: Chunk | None = ()


class ActiveBuilder:
    """The driver-side owner of the active views: set, append and remove by request id, and
    freeze into :class:`ActiveViews` for each snapshot. One thread only (the driver's)."""

    def __init__(self) -> None:
        self._chunks: list[_Block] = []
        self._where: dict[str, _Block] = {}  # request id -> its chunk
        self._frozen: ActiveViews = ActiveViews(lineage=self)
        self._dirty = False
        self._gone: list[Chunk] = []  # frozen chunks replaced or dropped since the last freeze

    def __len__(self) -> int:
        return len(self._where)

    def append(self, view: RequestView) -> None:
        """A new request, after every one there is (arrival order)."""
        chunks = self._chunks
        if not chunks or len(chunks[-1].views) >= CHUNK:
            chunks.append(_Block())
        chunk = chunks[-1]
        chunk.views.append(view)
        self._touch(chunk)
        self._where[view.request_id] = chunk
        self._dirty = True

    def set(self, old: RequestView, new: RequestView) -> None:
        """``old``'s place now holds ``new`` (the same request, a new view)."""
        chunk = self._where[old.request_id]
        views = chunk.views
        for i, view in enumerate(views):
            if view is old:
                views[i] = new
                break
        else:
            raise KeyError(old.request_id)
        self._touch(chunk)

    def remove(self, view: RequestView) -> None:
        """``view``'s request is no longer active (finished, aborted, rejected)."""
        chunk = self._where.pop(view.request_id)
        chunk.views.remove(view)
        self._touch(chunk)
        if len(chunk.views) < CHUNK // 4:
            self._mend(chunk)

    def _mend(self, chunk: _Block) -> None:
        """Keep chunks from thinning out as requests finish: an emptied one goes, a thin one
        joins the next when both fit in one (O(CHUNK), once per few removals)."""
        chunks = self._chunks
        if not chunk.views:
            chunks.remove(chunk)
            return
        at = chunks.index(chunk)
        if at + 1 < len(chunks) and len(chunk.views) + len(chunks[at + 1].views) <= CHUNK:
            following = chunks.pop(at + 1)
            self._touch(following)
            chunk.views.extend(following.views)
            for moved in following.views:
                self._where[moved.request_id] = chunk

    def _touch(self, chunk: _Block) -> None:
        """``chunk`` changed: its frozen tuple is one of the previous freeze's, gone now."""
        if chunk.frozen is not None:
            if chunk.frozen:
                self._gone.append(chunk.frozen)
            chunk.frozen = None
        self._dirty = True

    def clear(self) -> None:
        for chunk in self._chunks:
            self._touch(chunk)
        self._chunks.clear()
        self._where.clear()
        self._dirty = True

    def freeze(self) -> ActiveViews:
        """The views now, sharing every chunk that did not change since the last call."""
        if self._dirty:
            frozen: list[Chunk] = []
            new: list[Chunk] = []
            for chunk in self._chunks:
                if chunk.frozen is None:
                    chunk.frozen = tuple(chunk.views)
                    new.append(chunk.frozen)
                frozen.append(chunk.frozen)
            previous = self._frozen
            self._frozen = ActiveViews(
                tuple(frozen),
                lineage=self,
                generation=previous.generation + 1,
                new=tuple(new),
                gone=tuple(self._gone),
            )
            self._gone = []
            self._dirty = False
        return self._frozen
