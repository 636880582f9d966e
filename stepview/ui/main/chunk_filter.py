"""The requests of a snapshot that pass a test, at the cost of what changed since the last one.

A server in trouble holds 100 000 waiting requests, and the panes show about forty rows.
Sorting a snapshot's active requests into the Pending and Running panes (or through the ``/``
filter) tests every one of them: at 100 000 waiting and 4 000 running, those two passes were
most of a redraw (27 of 40 ms of CPU here). The driver's snapshots hold their active requests
in chunks that consecutive snapshots share while nothing in them changed
(:mod:`stepview.model.active`), so a :class:`ChunkFilter` tests each chunk once, when it first
sees it, and keeps what passed by the chunk's identity: a snapshot then costs the tests of the
chunks that changed and a few passes in C over the chunks' identities (one per 32 requests),
however many snapshots the screen skipped in between. Its result is chunked the same way, so a
second filter over it (the ``/`` filter over a pane's rows) is as cheap, and it is the very
object it was last time when no kept part changed. Anything else (a replay's tuple, the
Finished pane's list) is tested in one pass, into a list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from operator import is_, itemgetter

from stepview.model.active import ActiveViews, Chunk
from stepview.model.snapshot import RequestView

Select = Callable[[Sequence[RequestView]], Iterator[RequestView]]
"""The views of a sequence to keep, in its order (``filter`` or ``compress`` over it)."""

Part = tuple[Chunk, ...]
"""A chunk, then what each select kept of it."""


class ChunkFilter:
    """The views of each sequence given that each select keeps, in their order: one result
    per select, for the price of one (the Pending and the Running pane's rows at once)."""

    def __init__(self, *selects: Select) -> None:
        self._selects = selects
        self._parts: dict[int, Part] = {}  # id(chunk) -> its part (which keeps its id its own)
        self._seen: ActiveViews | None = None
        self._kept_parts: list[list[Chunk]] = [[] for _ in selects]
        self._kept = tuple(ActiveViews() for _ in selects)

    def apply(self, rows: Sequence[RequestView]) -> tuple[Sequence[RequestView], ...]:
        """What each select keeps of ``rows``: chunked when ``rows`` is, else a new list."""
        if not isinstance(rows, ActiveViews):
            self._seen, self._parts = None, {}
            return tuple(list(select(rows)) for select in self._selects)
        if rows is self._seen:
            return self._kept
        chunks = rows.chunks
        ids = list(map(id, chunks))
        parts = self._parts
        now = set(ids)
        for key in parts.keys() - now:
            del parts[key]  # a chunk no longer shown: let it go
        if len(parts) < len(now):
            by_id = dict(zip(ids, chunks, strict=True))
            for key in now - parts.keys():
                parts[key] = self._part(by_id[key])
        self._seen = rows
        shown = list(map(parts.__getitem__, ids))
        kept = []
        for i, old in enumerate(self._kept_parts):
            kept_parts = list(filter(None, map(itemgetter(i + 1), shown)))
            if len(kept_parts) != len(old) or not all(map(is_, kept_parts, old)):
                self._kept_parts[i] = kept_parts
                kept.append(ActiveViews(tuple(kept_parts)))
            else:
                kept.append(self._kept[i])  # nothing kept changed: the same object
        self._kept = tuple(kept)
        return self._kept

    def _part(self, chunk: Chunk) -> Part:
        part = [chunk]
        for select in self._selects:
            kept = tuple(select(chunk))
            part.append(chunk if len(kept) == len(chunk) else kept)
        return tuple(part)
