"""Where vLLM's scan of the waiting queues stopped, read in O(1): :func:`scan_head`.

A record names the queue by one request (:attr:`~stepview.engine.records.facts.StepFacts.
waiting_head`): everyone after it waits behind it, so "behind whom" is vLLM's own answer and
the record never lists the queue. Apart from the capture, which only asks for it, with the
blocked statuses both read.
"""

from __future__ import annotations

from typing import Any

from vllm.v1.request import RequestStatus

# vLLM's blocked waiting statuses: their requests are named in every record while they last.
BLOCKED = frozenset(
    {
        RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR,
        RequestStatus.WAITING_FOR_REMOTE_KVS,
        RequestStatus.WAITING_FOR_STREAMING_REQ,
    }
)


def scan_head(scheduler: Any, deferred: Any) -> str | None:
    """Where vLLM's scan of the waiting queues stopped: the first request, in the order it
    scans them (those holding KV blocks first), that it neither set aside nor found blocked.

    The scan pops what it schedules and puts what it sets aside back at the front, so this
    is the front of the queue, looked at in O(1), unless set-aside requests sit there.
    """
    for queue in (scheduler.kv_holding_waiting, scheduler.waiting):
        if not queue:
            continue
        first = queue.peek_request()
        if first not in deferred and first.status not in BLOCKED:
            return str(first.request_id)
        for req in queue:  # set-aside requests at the front: past them (rare, and few)
            if req not in deferred and req.status not in BLOCKED:
                return str(req.request_id)
    return None
