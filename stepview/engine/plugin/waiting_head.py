"""How vLLM's scan of the waiting queues ended, read in O(1): :class:`WaitingScan`.

A record names the queue by one request (:attr:`~stepview.engine.records.facts.StepFacts.
waiting_head`): everyone after it waits behind it, so "behind whom" is vLLM's own answer and
the record never lists the queue. From vLLM 0.34, with a KV connector and
``max_num_inflight_kv_loads``, requests that may load their KV cache asynchronously wait in a
queue of their own (``async_kv_waiting``), scanned beside ``waiting`` by arrival (or
priority), and a request whose load would pass that cap waits at the head of its queue: it is
named apart (``kv_load_capped``), since it waits for the cap and not for the KV cache. The
record also says whether vLLM's scheduler is paused. Apart from the capture, which only asks
for these; the statuses the scan passes over (blocked, or not known to stepview's table) are
:data:`stepview.engine.plugin.statuses.VLLM`'s, which the capture reads too.
"""

from __future__ import annotations

from typing import Any

from stepview.engine.plugin import statuses
from stepview.engine.records.vllm_versions import SchedulerRules

# What vLLM 0.34 reads to stop at the in-flight KV-load cap: the capture reads the same.
READS_KV_LOADS = ("async_kv_waiting", "_kv_fetch_stages", "_admits_inflight_kv_load")


class WaitingScan:
    """The fields of a record that say where vLLM's scan of the waiting queues ended, for a
    scheduler that follows ``rules`` (its settings read once)."""

    def __init__(self, scheduler: Any, rules: SchedulerRules) -> None:
        config = scheduler.scheduler_config
        newer = rules.kv_load_queue  # 0.34 on: the settings exist
        self.max_kv_loads = int(config.max_num_inflight_kv_loads or 0) if newer else 0
        self.window = int(config.cache_aware_admission_window or 0) if newer else 0
        self._priority = scheduler.policy.value == "priority"
        self._not_started = ""  # the stage of a load vLLM considered and did not start
        if self.max_kv_loads:
            from vllm.v1.metrics.stats import KV_FETCH_WAITING_TO_START

            self._not_started = KV_FETCH_WAITING_TO_START

    def fields(self, scheduler: Any, deferred: Any) -> dict[str, Any]:
        """The record's ``waiting_head``, ``kv_load_capped``, ``paused`` and the settings."""
        capped = self._at_load_cap(scheduler) if self.max_kv_loads else []
        loads = scheduler.async_kv_waiting if self.max_kv_loads else None
        return {
            "waiting_head": self.scan_head(scheduler, deferred, loads, capped),
            "kv_load_capped": [str(req.request_id) for req in capped],
            "paused": int(scheduler.pause_state),
            "max_kv_loads": self.max_kv_loads,
            "cache_aware_window": self.window,
        }

    def scan_head(
        self, scheduler: Any, deferred: Any, loads: Any = None, capped: list[Any] | None = None
    ) -> str | None:
        """Where vLLM's scan of the waiting queues stopped: the first request, in the order
        it scans them, that it neither set aside nor found blocked. Those holding KV blocks
        come first; then the heads of ``waiting`` and of the KV-load queue (``loads``), by
        arrival or priority, as vLLM picks between them, but past a head held at the load
        cap (``capped``), which vLLM leaves for the rest of the step.
        """
        holding = _first(scheduler.kv_holding_waiting, deferred)
        if holding is not None:
            return str(holding.request_id)
        head = _first(scheduler.waiting, deferred)
        loading = None if loads is None else _first(loads, deferred)
        if loading is not None and (
            head is None or (loading not in (capped or ()) and self._before(loading, head))
        ):
            head = loading
        return None if head is None else str(head.request_id)

    def _before(self, req: Any, other: Any) -> bool:
        """Whether vLLM 0.34 takes ``req`` before ``other`` (``_next_waiting_queue``)."""
        return bool(req < other) if self._priority else req.arrival_time < other.arrival_time

    def _at_load_cap(self, scheduler: Any) -> list[Any]:
        """The heads of the waiting queues vLLM 0.34's scan left for the in-flight KV-load
        cap: it marks a request whose load it considered (``waiting_to_start``), then keeps
        it at its queue's head when the cap admits no more loads. O(1)."""
        if scheduler._admits_inflight_kv_load():
            return []
        stages = scheduler._kv_fetch_stages or {}
        queues = (scheduler.waiting, scheduler.async_kv_waiting)
        heads = (queue.peek_request() for queue in queues if queue)
        return [req for req in heads if stages.get(req) == self._not_started]


def _first(queue: Any, deferred: Any) -> Any:
    """The first request of ``queue`` neither set aside nor blocked. vLLM's scan pops what
    it schedules and puts what it sets aside back at the front, so this is the front of the
    queue, looked at in O(1), unless set-aside requests sit there."""
    if not queue:
        return None
    blocked = statuses.VLLM.set_aside
    first = queue.peek_request()
    if first not in deferred and first.status not in blocked:
        return first
    for req in queue:  # set-aside requests at the front: past them (rare, and few)
        if req not in deferred and req.status not in blocked:
            return req
    return None
