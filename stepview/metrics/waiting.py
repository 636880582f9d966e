"""How many requests wait, by stepview's reason, at the cost of what a step changed.

A server in trouble holds thousands of waiting requests, and nearly all of them wait for the
reason their queue shares (:func:`~stepview.model.snapshot.reason_of`): their views carry no
reason and do not change from step to step. Counting them one by one on every step would
cost what the run holds. So :class:`WaitingByReason` counts only the few with a reason of
their own, kept up to date from the views that changed between two snapshots (the chunks a
step touched, :func:`~stepview.model.active.changed_between`), and counts the rest of each
queue as its queue's reason: the engine's waiting count for that queue less those with a
reason of their own. A queue without a shared reason (vLLM did not say, the plug-in is off,
requests added since the step) gives :data:`UNKNOWN`, so that the reasons of a queue always
add up to what the engine says waits in it.

Requests still in stepview's own queue (``--admit-per-step``: state ``pending``, reason
``not_admitted``) are not in the engine's count; they are counted by their reason alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Final

from stepview.model.active import changed_between
from stepview.model.scheduling import UNKNOWN, WAIT_CODES
from stepview.model.snapshot import QUEUED, RequestState, RequestView, StepSnapshot

REASONS: Final = WAIT_CODES
"""Every value of the ``reason`` label, in a fixed order: the table's (model.scheduling), whose
last, :data:`UNKNOWN`, is what the queue's count is when it has no shared reason."""

_IN_ENGINE: Final = QUEUED
_WAITING: Final = frozenset({RequestState.PENDING, *_IN_ENGINE})

# (queue, reason code) -> requests
Counts = dict[tuple[int, str], int]


class WaitingByReason:
    """Waiting requests by (queue, reason), fed one snapshot at a time on one thread."""

    def __init__(self) -> None:
        self._before: Sequence[RequestView] = ()
        self._own: Counter[tuple[int, str]] = Counter()  # own reasons, by queue and code
        self._own_in_engine: Counter[int] = Counter()  # ... of requests in the engine's queues

    def observe(self, snapshot: StepSnapshot) -> Counts:
        """The counts after ``snapshot``: every reason of every queue, zeros included."""
        gone, new = changed_between(self._before, snapshot.active)
        self._before = snapshot.active
        self._add(gone, -1)
        self._add(new, 1)
        reasons = snapshot.queue_reasons
        ranks = snapshot.ranks
        queues = range(max(len(reasons), len(ranks), 1))
        counts: Counts = {(queue, code): 0 for queue in queues for code in REASONS}
        for key, count in self._own.items():
            if count:
                counts[key] = count
        for queue in queues:
            if ranks:
                in_engine = ranks[queue].waiting if queue < len(ranks) else 0
            else:
                in_engine = snapshot.counters.waiting if queue == 0 else 0
            shared = reasons[queue] if queue < len(reasons) else None
            code = UNKNOWN if shared is None else shared.code
            counts[queue, code] += max(0, in_engine - self._own_in_engine[queue])
        return counts

    def _add(self, views: Iterable[RequestView], sign: int) -> None:
        """Count (``sign`` 1) or uncount (-1) the views' own reasons. A view that did not
        change comes in both the gone and the new ones, and so cancels out."""
        own, own_in_engine = self._own, self._own_in_engine
        for view in views:
            reason = view.wait_reason
            if reason is None or view.state not in _WAITING:
                continue
            own[view.queue, reason.code] += sign
            if view.state in _IN_ENGINE:
                own_in_engine[view.queue] += sign
