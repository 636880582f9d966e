"""Requests that arrive later: a load's Poisson arrivals, a prompts file's ``"at"`` times.

The driver owns one :class:`ArrivalQueue`. A :class:`~stepview.model.commands.Schedule`
puts its requests in, dated on the driver's clock from the moment it was received; each loop
iteration takes out those that are due (:meth:`ArrivalQueue.due`), and an idle driver sleeps
no longer than :meth:`ArrivalQueue.wait`, so a request is added when its time comes and no
step ever waits for one. No thread, no clock of its own: the driver passes ``now``.
"""

from __future__ import annotations

import heapq
import itertools

from stepview.model.commands import AddRequest, Schedule
from stepview.model.snapshot import ArrivalCount


class ArrivalQueue:
    """Scheduled requests by arrival time (ties keep the order they were scheduled in)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, AddRequest]] = []
        self._order = itertools.count()
        self._total = 0
        self._arrived = 0

    def schedule(self, schedule: Schedule, now: float) -> None:
        """Date each of the schedule's requests ``now`` plus its ``at``."""
        for arrival in schedule.arrivals:
            heapq.heappush(self._heap, (now + arrival.at, next(self._order), arrival.request))
        self._total += len(schedule.arrivals)

    def due(self, now: float) -> list[AddRequest]:
        """The requests whose time has come, in arrival order (taken out of the queue)."""
        heap = self._heap
        out: list[AddRequest] = []
        while heap and heap[0][0] <= now:
            out.append(heapq.heappop(heap)[2])
        self._arrived += len(out)
        return out

    def wait(self, now: float, longest: float) -> float:
        """How long an idle driver may sleep: until the next arrival, at most ``longest``."""
        if not self._heap:
            return longest
        return min(longest, max(0.0, self._heap[0][0] - now))

    @property
    def waiting(self) -> bool:
        """Requests are still to arrive."""
        return bool(self._heap)

    @property
    def count(self) -> ArrivalCount:
        """How many scheduled requests arrived so far, of how many (for the status bar)."""
        return ArrivalCount(self._arrived, self._total)

    def clear(self) -> int:
        """Forget the requests still to arrive (the run ends); how many there were."""
        left = len(self._heap)
        self._heap.clear()
        return left
