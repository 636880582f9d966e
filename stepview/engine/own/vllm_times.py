"""vLLM's own times for a request: when its engine core first scheduled it, and its first token.

stepview's ledger sees a step only once it is over, so by its own clock a request is
"scheduled" and "gets its first token" at the same instant, the end of its prefill step, and
queue time would include the prefill. vLLM records both instants itself (the core's
``SCHEDULED`` event at the start of ``schedule()``; the timestamp of the outputs that carry the
first token), on each request's ``RequestStateStats``, and for a request that finished in this
step on its ``FinishedRequestStats`` (the request's state is gone by the time ``step()``
returns). :class:`StampReader` turns those into :class:`~stepview.model.engine_api.VllmStamps`
once per request, when its first token arrives: a dictionary lookup for each output of a step,
nothing for a request that only waits.

The timestamps are the core's ``time.monotonic()``; the core runs on this host (in this process
or a child), so the same clock. A vLLM whose stats look otherwise gives no stamps: the ledger
then keeps its own step-end times.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from stepview.engine.own.vllm_stats import StatsSink
from stepview.model.engine_api import OutputUpdate, VllmStamps


class StampReader:
    """Reads vLLM's scheduled / first-token times from its output processor, once per request."""

    def __init__(self, output_processor: Any, sink: StatsSink | None) -> None:
        self._states: dict[str, Any] = getattr(output_processor, "request_states", {})
        # caller id -> vLLM's internal ids (several for n > 1: one per sample).
        self._internal: dict[str, list[str]] = getattr(output_processor, "external_req_ids", {})
        self._sink = sink
        self._stamped: set[str] = set()  # caller ids whose first token has been stamped

    def read(self, outputs: Sequence[OutputUpdate]) -> dict[str, VllmStamps]:
        """Stamps for the requests in ``outputs`` that produced their first token this step."""
        stamps: dict[str, VllmStamps] = {}
        stamped = self._stamped
        now = time.monotonic()
        for update in outputs:
            request_id = update.request_id
            if request_id in stamped:
                if update.finished:
                    stamped.discard(request_id)
                continue
            stamp = self._live(request_id, now) or self._finished(request_id)
            if stamp is None:
                continue
            stamps[request_id] = stamp
            if not update.finished:
                stamped.add(request_id)
        return stamps

    def forget(self, request_id: str) -> None:
        """An aborted request: it will report no finished output."""
        self._stamped.discard(request_id)

    def _live(self, request_id: str, now: float) -> VllmStamps | None:
        scheduled = first = 0.0
        for internal in self._internal.get(request_id, ()):
            state = self._states.get(internal)
            stats = getattr(state, "stats", None)
            if stats is None or not stats.first_token_ts:
                continue
            if not first or stats.first_token_ts < first:
                first = stats.first_token_ts
            if stats.scheduled_ts and (not scheduled or stats.scheduled_ts < scheduled):
                scheduled = stats.scheduled_ts
        if not first:
            return None
        return VllmStamps(now - (scheduled or first), now - first)

    def _finished(self, request_id: str) -> VllmStamps | None:
        """From the ``FinishedRequestStats`` of a request gone from the output processor."""
        sink = self._sink
        if sink is None or not sink.recorded:
            return None
        finished = sink.finished.get(request_id)
        if finished is None:
            return None
        prefill, decode, iteration_wall = finished
        # The outputs of this step are dated (close to) the iteration's timestamp.
        first_ago = max(0.0, time.time() - iteration_wall) + decode
        return VllmStamps(first_ago + prefill, first_ago)
