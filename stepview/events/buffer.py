"""The stream's memory: the latest events, numbered from 1, for every reader to follow.

One :class:`EventBuffer` is shared by the driver thread(s) that append and the server thread
that reads (:mod:`stepview.events.sse`). Appending is O(1) and takes no lock a reader holds
for long: a slot of a ring of ``size`` entries is set, then the newest number; a reader reads
the newest number first and checks each slot's number, so a slot overwritten under it (the
reader fell a whole ring behind) is seen and counted as lost, never read as another event.
Several drivers (a fleet's) append under one short lock, so numbers stay in order.

Each event is encoded once, by the first reader that needs it (:meth:`EventBuffer.encoded`),
on the server's thread: the driver thread pays for the dict and a slot, not for JSON.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

Event = dict[str, Any]


class EventBuffer:
    """The latest ``size`` events; :attr:`newest` is the number of the last one (0: none)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("the event buffer holds at least 1 event")
        self.size = size
        self._events: list[tuple[int, Event] | None] = [None] * size
        self._lines: list[tuple[int, bytes] | None] = [None] * size
        self.newest = 0
        self._lock = threading.Lock()
        self.wake: Callable[[], None] = _nothing
        """Called after each batch is appended (the server thread's wake-up)."""

    @property
    def oldest(self) -> int:
        """The number of the oldest event still held (``newest + 1`` when none is)."""
        return max(1, self.newest - self.size + 1) if self.newest else 1

    def extend(self, events: Sequence[Event]) -> None:
        """Append ``events`` in order, numbered on from :attr:`newest`, then wake the reader."""
        if not events:
            return
        with self._lock:
            number = self.newest
            slots = self._events
            size = self.size
            for event in events:
                number += 1
                slots[number % size] = (number, event)
            self.newest = number
        self.wake()

    def encoded(self, number: int) -> bytes | None:
        """The event ``number`` as a Server-Sent Event (``id:`` and one ``data:`` line), or
        ``None`` if the buffer no longer holds it."""
        index = number % self.size
        line = self._lines[index]
        if line is not None and line[0] == number:
            return line[1]
        held = self._events[index]
        if held is None or held[0] != number:
            return None
        data = json.dumps(held[1], separators=(",", ":"), ensure_ascii=False)
        text = f"id: {number}\ndata: {data}\n\n".encode()
        if self._events[index] is held:  # not overwritten meanwhile
            self._lines[index] = (number, text)
        return text


def _nothing() -> None:
    pass
