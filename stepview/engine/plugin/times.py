"""vLLM's own times for a request, as the plug-in puts them in its records: :class:`CoreTimes`.

vLLM splits a request's latency by three instants its engine core records (what
``FinishedRequestStats`` in ``vllm/v1/metrics/stats.py`` is computed from): its first
``SCHEDULED`` event (queue ends, prefill starts) and the timestamp of the engine-core outputs
that carried its first token (prefill ends, decode starts). Its front end learns them from the
outputs; a client that watches the core through the plug-in's records (``stepview --attach``)
does not see those outputs, so the records carry the two instants
(:attr:`~stepview.engine.records.facts.RequestFacts.scheduled_at`, ``first_token_at``).

Records of change, here too: the scheduled time is read from the request's own event list,
which vLLM keeps only from its arrival to its first output, so only for requests a record
names anyway; the first-token time is taken after each ``update_from_output`` from the
requests scheduled and still without a token (those in prefill: a few), never from the
requests the core holds.

The core's timestamps are ``time.monotonic()`` in its process, a clock no other process (or
machine) can read. The records are dated by the wall clock (:attr:`StepFacts.time`), which a
subscriber places on its own timeline already, so the times are put on that clock here, by
the offset between the two clocks read when they are converted.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from vllm.v1.engine import EngineCoreEventType

_SCHEDULED = EngineCoreEventType.SCHEDULED


def wall_offset() -> float:
    """What to add to a ``time.monotonic()`` timestamp to put it on the wall clock."""
    return time.time() - time.monotonic()


class CoreTimes:
    """The requests waiting for their first token, and the first-token times not sent yet."""

    __slots__ = ("first", "made", "offset", "unstamped")

    def __init__(self) -> None:
        # core id -> (Request, its scheduled time): scheduled, no token yet
        self.unstamped: dict[str, tuple[Any, float]] = {}
        self.first: dict[str, float] = {}  # core id -> first-token time (wall), not sent yet
        # core id -> (scheduled, first token), kept until it ends: the log of ends carries
        # them (vLLM drops its events with the first output; the record's went long before).
        self.made: dict[str, tuple[float, float]] = {}
        self.offset = 0.0  # wall_offset() as of the record being built

    def scheduled_at(self, events: Iterable[Any]) -> float:
        """When vLLM first scheduled a request with these events (wall clock); 0.0: not yet,
        or stats are off (``--disable-log-stats``: vLLM records no events)."""
        for event in events:
            if event.type == _SCHEDULED:
                return float(event.timestamp) + self.offset
        return 0.0

    def outputs_made(self, scheduled: Mapping[str, int], outputs: Any) -> None:
        """After ``update_from_output``: the requests that got their first token in it are
        dated by its outputs' timestamp (O(requests in prefill), or of the step's)."""
        waiting = self.unstamped
        if not waiting:
            return
        at: float | None = None
        for request_id in scheduled if len(scheduled) < len(waiting) else list(waiting):
            held = waiting.get(request_id)
            if held is None:
                continue
            req = held[0]
            if req.num_output_tokens:
                if at is None:
                    at = _outputs_time(outputs) + wall_offset()
                self.first[request_id] = at
                self.made[request_id] = (held[1], at)
                del waiting[request_id]
            elif req.is_finished():
                del waiting[request_id]

    def forget(self, request_id: str) -> float:
        """The request left; its first-token time if it was not sent (0.0: none)."""
        self.unstamped.pop(request_id, None)
        self.made.pop(request_id, None)
        return self.first.pop(request_id, 0.0)

    def of(self, request_id: str) -> tuple[float, float]:
        """vLLM's (scheduled, first token) times of a request, as far as they were seen."""
        made = self.made.get(request_id)
        if made is not None:
            return made
        held = self.unstamped.get(request_id)
        return (0.0, 0.0) if held is None else (held[1], 0.0)

    def clear(self) -> None:
        self.unstamped.clear()
        self.first.clear()
        self.made.clear()


def _outputs_time(outputs: Any) -> float:
    """The timestamp of the engine-core outputs an update made (what vLLM's front end dates a
    request's first token by); now if it made none."""
    if isinstance(outputs, Mapping):
        for made in outputs.values():
            stamp = getattr(made, "timestamp", 0.0)
            if stamp:
                return float(stamp)
    return time.monotonic()
