"""Request ids seen lately: "was this id given before?" in bounded memory.

A second request under an id already given would be indistinguishable from the first, for
the engine (the ledger refuses it) and for a watch's ledger (which takes it for the first
seen again): both remember the ids of the latest :data:`SEEN_IDS_KEPT` requests, and a watch
names other clients' requests so that no name comes twice within them
(:class:`~stepview.engine.watch.link.adopting.ClientNames`).
"""

from __future__ import annotations

from collections import deque

SEEN_IDS_KEPT = 200_000


class RecentIds:
    """The latest ``kept`` ids added (the oldest forgotten first), for membership tests."""

    def __init__(self, kept: int = SEEN_IDS_KEPT) -> None:
        self._kept = kept
        self._ids: set[str] = set()
        self._order: deque[str] = deque()

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._ids

    def add(self, request_id: str) -> None:
        """Remember ``request_id`` (not already remembered), forgetting the oldest past the
        bound."""
        self._ids.add(request_id)
        order = self._order
        order.append(request_id)
        if len(order) > self._kept:
            self._ids.discard(order.popleft())
