"""Fakes of vLLM 0.32's scheduler, as far as the plug-in's capture reads it, and a sink.

The capture's rules are tested on these (test_scheduler_plugin_capture.py) and so is its
check of the running vLLM version (test_plugin_versions.py): no engine is started.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from stepview.engine.plugin.capture import CoreCapture
from stepview.engine.records.facts import StepFacts

MODEL = "fake-served-model"  # the scheduler's vllm_config.model_config.served_model_name


@dataclass
class FakeRequest:
    status: Any
    num_prompt_tokens: int
    num_computed_tokens: int = 0
    num_preemptions: int = 0
    num_output_tokens: int = 0
    prefill_stats: Any = None
    arrival_time: float = 1.0
    priority: int = 0
    max_tokens: int = 16
    output_token_ids: list[int] = field(default_factory=list)
    prompt_token_ids: list[int] | None = None
    sampling_params: Any = None
    request_id: str = ""
    stop_reason: int | str | None = None
    lora_request: Any = None
    events: list[Any] = field(default_factory=list)  # vLLM's EngineCoreEvents not handed over

    def get_finished_reason(self) -> Any:
        return self.status.get_finished_reason(self.status)

    def is_finished(self) -> bool:
        return bool(self.status.is_finished(self.status))

    __hash__ = object.__hash__  # vLLM keeps requests in sets (deferred_waiting)


class FakeQueue(list[FakeRequest]):
    """vLLM's request queue, as far as the capture reads it: iterated, peeked at the front."""

    def peek_request(self) -> FakeRequest:
        return self[0]


@dataclass
class FakeScheduler:
    """The attributes of vLLM 0.32's Scheduler the capture reads, and nothing else.

    ``order`` is the waiting queue's order (vLLM puts preempted requests back in front);
    by default the waiting and preempted requests as listed.
    """

    requests: dict[str, FakeRequest]
    blocks: dict[str, list[int]] = field(default_factory=dict)
    deferred_waiting: set[FakeRequest] = field(default_factory=set)
    finished_req_ids: set[str] = field(default_factory=set)
    counts: tuple[int, int] = (1, 0)
    order: list[str] | None = None

    def __post_init__(self) -> None:
        requests: dict[str, FakeRequest] = self.__dict__.get("requests", {})
        for request_id, req in requests.items():
            req.request_id = req.request_id or request_id
        self.parallel_config = SimpleNamespace(data_parallel_index=0, data_parallel_rank=0)
        self.vllm_config = SimpleNamespace(model_config=SimpleNamespace(served_model_name=MODEL))
        pool = SimpleNamespace(num_gpu_blocks=101, get_num_free_blocks=lambda: 60)
        manager = SimpleNamespace(req_to_blocks=self.blocks)
        self.kv_cache_manager = SimpleNamespace(
            block_pool=pool, coordinator=SimpleNamespace(single_type_managers=[manager])
        )
        self.max_num_scheduled_tokens = 2048
        self.max_num_running_reqs = 32
        self.block_size = 16
        self.scheduler_config = SimpleNamespace(
            enable_chunked_prefill=True, long_prefill_token_threshold=0, prefill_schedule_interval=1
        )
        self.running: list[FakeRequest] = []
        self.prefill_capacity_bound = False
        self.pause_state = 0  # vLLM's PauseState.UNPAUSED
        self.lora_config = None
        self.policy = SimpleNamespace(value="fcfs")
        # vLLM's waiting queues: requests holding KV blocks first, then the rest.
        self.kv_holding_waiting = FakeQueue()
        self.num_waiting_for_streaming_input = 0
        if self.order is not None:
            self.waiting = FakeQueue(requests[i] for i in self.order)
        else:
            waits = ("WAITING", "PREEMPTED")
            self.waiting = FakeQueue(
                r for r in requests.values() if getattr(r.status, "name", "") in waits
            )

    def get_request_counts(self) -> tuple[int, int]:
        return self.counts


def _output(
    scheduled: dict[str, int], finished: Iterable[str] = (), preempted: Iterable[str] = ()
) -> Any:
    """The fields of vLLM's SchedulerOutput the capture reads."""
    return SimpleNamespace(
        num_scheduled_tokens=scheduled,
        total_num_scheduled_tokens=sum(scheduled.values()),
        finished_req_ids=set(finished),
        preempted_req_ids=set(preempted),
    )


class ListSink:
    """A sink that keeps every record (and can say nobody listens)."""

    def __init__(self, wanted: bool = True) -> None:
        self.records: list[StepFacts] = []
        self.want = wanted
        self.closed = False
        self.fresh = False
        self.tails = True

    def wanted(self) -> bool:
        return self.want

    def deliver(self, facts: StepFacts) -> None:
        self.records.append(facts)

    def close(self) -> None:
        self.closed = True


def _captured(scheduler: FakeScheduler, scheduled: dict[str, int]) -> tuple[CoreCapture, ListSink]:
    capture = CoreCapture(scheduler)
    assert capture.failure is None  # the fake holds all the plug-in reads of vLLM 0.32
    capture.sink = sink = ListSink()
    capture.after_schedule(scheduler, _output(scheduled))
    return capture, sink
