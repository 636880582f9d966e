"""Which requests the plug-in's next record names: :class:`Naming`, and :class:`FullParts`.

A record names the requests whose facts may have changed since the previous one (see
:mod:`~stepview.engine.plugin.capture`): those that arrived, were scheduled in this step or the
one before, were preempted, set aside or un-set-aside (vLLM's ``deferred_waiting``), those in a
blocked waiting status, and those whose first token's time is owed. That is known from vLLM's
own events, without looking at the others: the work per step follows what changed, never what
the core holds.

A **full** record names every request the core holds. A new subscriber needs one, and a watch
joins, or comes back, when a server is in trouble: holding thousands of requests, each of which
the record carries with its intro and its output so far (tens of microseconds a request). Built
in one step, that was the step's delay: 83 ms at 2 048 requests held, 628 ms at 8 192. So a new
subscriber's full record goes in **parts** (:class:`FullParts`), one per record, each at most
:data:`PART_REQUESTS` requests (``STEPVIEW_FULL_PART``; 0: the whole record at once) and their
share of tokens: the first record is ``full`` and names the first part besides what changed; the
following ones name the next parts; ``to_come`` in each says how many of the requests the core
held at the first are still to be introduced (0 in the last part). A request a part has not
reached yet is named by any record it changes in; the intros and token tails of those held at
the first share the part's budget (a server running 256 requests would otherwise introduce all
of them in the first part's step): one over it is named without them (:attr:`Naming.later`)
and introduced by a later part (the parts go through the requests in order and stop where a
part's budget runs out, which is before any request is put off: none is passed over).
Requests that arrive meanwhile are introduced at once, as always (what changed). The reader
reads the parts as one full record, as of the last part
(:meth:`~stepview.engine.records.stream.RecordStream.take`): the same picture, a few steps
later. A full record that fits in one part (and the in-process listener's, which nobody joins)
goes at once, as before.

Why parts and not a copy built on another thread: the copy is the cost (reading each request's
state is most of the work), vLLM's requests change under the scheduling thread, and a thread
building the record in the engine core's process takes the interpreter lock from the step.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Container, Iterable, Mapping
from itertools import chain
from typing import Any

from stepview.engine.records.channel import FULL_PART_ENV

log = logging.getLogger("stepview.engine.plugin")

# Requests a part names at most (STEPVIEW_FULL_PART), and the prompt and output tokens each may
# carry on average (a part stops at PART_REQUESTS * PART_TOKENS_EACH of them; at least one
# request per part): intros and token tails are most of a part's cost, and a prompt of 30 000
# tokens costs as much as a hundred short ones. Chosen by ``python -m benchmarks capture_cost``
# (docs/performance.md: what a watch joining costs a step).
PART_REQUESTS = 24
PART_TOKENS_EACH = 256
# Ids a part looks at, at most, per request it may name: those that left since the first part
# are passed over, and a burst of aborts must not make one step walk thousands of them.
PART_LOOKS = 8


def part_size() -> int:
    """Requests per part of a full record (``STEPVIEW_FULL_PART``; a bad value: default)."""
    raw = os.environ.get(FULL_PART_ENV, "").strip()
    if not raw:
        return PART_REQUESTS
    try:
        return max(0, int(raw))
    except ValueError:
        log.warning("stepview: %s=%r is not a number of requests; using the default",
                    FULL_PART_ENV, raw)  # fmt: skip
        return PART_REQUESTS


class FullParts:
    """The requests a full record in parts has still to introduce: those the core held when
    it began, in the core's order (copying their ids is the one O(held) step: a few
    microseconds a thousand)."""

    def __init__(self, ids: list[str], size: int) -> None:
        self._ids = ids
        self._next = 0  # the first id no part has looked at
        self._size = size

    @property
    def to_come(self) -> int:
        """At most how many requests are still to be introduced (some may leave first)."""
        return len(self._ids) - self._next

    def part(
        self,
        named: dict[str, Any],
        new: Container[str],
        requests: Mapping[str, Any],
        sent: Container[str],
    ) -> set[str]:
        """Add the next part to ``named`` (what changed, ``new`` those that just arrived):
        the requests held at the first part that are named and not introduced yet (not in
        ``sent``), then the next ones not named yet, within the part's budget; those named
        beyond it are returned, to be named without their intro (the next parts reach them:
        this one stops where its budget ran out)."""
        budget = Budget(self._size)
        later: set[str] = set()
        for request_id in named:
            if request_id not in sent and request_id not in new:
                req = requests.get(request_id)
                if req is not None and not budget.take(req):
                    later.add(request_id)
        ids = self._ids
        i, stop = self._next, min(len(ids), self._next + self._size * PART_LOOKS)
        while i < stop and not budget.spent:
            request_id = ids[i]
            i += 1
            if request_id in named or request_id in sent:
                continue
            req = requests.get(request_id)
            if req is not None and budget.take(req):
                named[request_id] = None
        self._next = i
        return later


class Budget:
    """What one part may introduce: ``size`` requests and their share of prompt and output
    tokens (at least one request, however long)."""

    __slots__ = ("_requests", "_tokens")

    def __init__(self, size: int) -> None:
        self._requests = size
        self._tokens = size * PART_TOKENS_EACH

    @property
    def spent(self) -> bool:
        return self._requests <= 0 or self._tokens <= 0

    def take(self, req: Any) -> bool:
        """Whether ``req`` fits (then it is counted in)."""
        if self.spent:
            return False
        self._requests -= 1
        self._tokens -= req.num_prompt_tokens + req.num_output_tokens
        return True


class Naming:
    """What the next record must name besides every request in it by its own right (those
    scheduled or preempted in the step), and the full record's parts under way."""

    def __init__(self, part: int) -> None:
        self._part = part  # requests per part of a full record (0: no parts)
        self._parts: FullParts | None = None
        self.arrived: list[str] = []  # added since the last record
        self._last_scheduled: list[str] = []  # scheduled in the last record's step
        self._deferred: set[Any] = set()  # vLLM's deferred_waiting as of the last record
        self.blocked: set[str] = set()  # in a blocked waiting status at the last record
        self.later: Container[str] = ()  # named by the record without their intro (for now)

    def clear(self) -> None:
        """Nobody listens any more: whoever comes next gets a full record."""
        self._parts = None
        self.later = ()
        self.arrived.clear()
        self._last_scheduled = []
        self._deferred = set()
        self.blocked = set()

    def named(
        self,
        requests: Mapping[str, Any],
        scheduled: Mapping[str, int],
        preempted: Iterable[str],
        first: Iterable[str],
        deferred: set[Any],
        full: bool,
        fresh: bool,
        sent: Container[str],
    ) -> Mapping[str, Any]:
        """The requests the record names, in order (the same steps give the same records):
        every one held when ``full``, in parts when ``fresh`` (a new subscriber's record) and
        the core holds more than a part; else what changed, and the next part under way."""
        parts = self._parts
        self.later = ()
        if full:
            size = self._part
            big = fresh and size and len(requests) > size
            self._parts = parts = FullParts(list(requests), size) if big else None
        named: Mapping[str, Any] = requests
        if not full or parts is not None:
            # An ordered dict, not a set: the same steps give the same records, anywhere.
            changed: dict[str, Any] = dict.fromkeys(
                chain(self.arrived, scheduled, self._last_scheduled, preempted, self.blocked, first)
            )
            if deferred or self._deferred:
                changed.update(dict.fromkeys(r.request_id for r in deferred ^ self._deferred))
            if parts is not None:
                self.later = parts.part(changed, set(self.arrived), requests, sent)
            named = changed
        self.arrived.clear()
        self._last_scheduled = list(scheduled)
        self._deferred = set(deferred)
        return named

    def owes(self, request_id: str, sent: Container[str]) -> bool:
        """Whether the full record under way has still to introduce ``request_id`` (not
        introduced since its first part, those are in ``sent``): one that ends now is named
        with its end, or the new subscriber would never see it."""
        return self._parts is not None and request_id not in sent

    def to_come(self, idle: bool) -> int:
        """The record's ``to_come`` (after :meth:`named`); the parts end with the last one,
        or when the core went idle (it holds nothing: whatever was to come has left)."""
        parts = self._parts
        left = 0 if parts is None or idle else parts.to_come
        if not left:
            self._parts = None
        return left
