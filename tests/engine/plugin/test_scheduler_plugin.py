"""The scheduler plug-in and the view built on it: rules on fake schedulers, then real vLLM.

The real-engine tests here run the engine core in this process (the plug-in's in-process
listener); tests/engine/own/test_multiprocess.py runs the same plug-in in a core process.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from stepview.engine.plugin.capture import CoreCapture
from stepview.engine.plugin.client_side import client_id_lookup
from stepview.engine.plugin.config import PLUGIN_QUALNAME, resolve_base, user_scheduler_base
from stepview.engine.plugin.scheduler import StepviewScheduler, chained_class
from stepview.engine.records.entries import EntryReader
from stepview.engine.records.facts import CoreState, StepFacts
from stepview.model.engine_api import SchedulerEntry, StepResult
from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import StepBudget, WaitReason
from stepview.model.snapshot import RequestState
from tests.engine.plugin.gated_scheduler import GatedScheduler
from tests.helpers import Entries
from tests.vllm_engines import EnginePool

pytestmark = pytest.mark.engine

S = RequestState
RUNNING_STATES = {S.PREFILLING, S.DECODING}
QUEUED_STATES = {S.WAITING, S.PREEMPTED}


# -- rules, on fakes -------------------------------------------------------------------------


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


def test_states_merging_and_preemption_count_on_fakes() -> None:
    from vllm.v1.request import RequestStatus as RS

    requests = {
        "a-1": FakeRequest(RS.WAITING, 10),
        "b-1": FakeRequest(RS.RUNNING, 100, 64),
        "c-1": FakeRequest(RS.RUNNING, 10, 15, num_output_tokens=5),
        "d-1": FakeRequest(RS.PREEMPTED, 10, 0, 1),
        "0_e-1": FakeRequest(RS.RUNNING, 10, 12, num_output_tokens=2),
        "1_e-1": FakeRequest(RS.PREEMPTED, 10, 0, 2),
        "f-1": FakeRequest(RS.FINISHED_STOPPED, 10, 20),
        "g-1": FakeRequest(RS.WAITING_FOR_REMOTE_KVS, 10, 0, 1),
        "orphan-1": FakeRequest(RS.RUNNING, 10, 10),  # no client state: being aborted
    }
    external = {
        k: k.split("_", 1)[-1].rsplit("-", 1)[0] for k in requests if not k.startswith("orphan")
    }
    # vLLM's queue: the preempted ones back in front, then the one that waits.
    order = ["d-1", "1_e-1", "g-1", "a-1"]
    scheduler = FakeScheduler(requests, blocks={"b-1": [1, 2, 3, 4], "c-1": [5]}, order=order)
    capture, sink = _captured(scheduler, {"b-1": 64, "c-1": 1, "0_e-1": 1})
    facts = sink.records[-1]
    assert facts.full and facts.seq == 1  # the first record: every request
    assert "f-1" not in {r.req_id for r in facts.requests}  # finished: not the view's to tell
    assert (facts.prefill_tokens, facts.decode_tokens) == (64, 2)
    assert (facts.kv_free_blocks, facts.kv_total_blocks, facts.token_budget) == (60, 100, 2048)
    assert facts.waiting_head == "d-1"  # the front of the queue: where the scan stopped
    by_id = {r.req_id: r for r in facts.requests}
    assert by_id["b-1"].num_kv_blocks == 4 and by_id["a-1"].num_kv_blocks == 0
    assert by_id["g-1"].state == CoreState.WAITING_FOR_REMOTE_KVS

    view = EntryReader(external.get)
    got = view.read(facts)
    assert {k: SchedulerEntry(*v[:4]) for k, v in got.items()} == {
        "a": SchedulerEntry(S.WAITING, 10, 0, 0),
        "b": SchedulerEntry(S.PREFILLING, 100, 64, 0),
        "c": SchedulerEntry(S.DECODING, 10, 10, 0),  # computed includes decoded tokens
        "d": SchedulerEntry(S.PREEMPTED, 10, 0, 1),
        "e": SchedulerEntry(S.DECODING, 10, 10, 2),  # most advanced child, preemptions summed
        "g": SchedulerEntry(S.PREEMPTED, 10, 0, 1),
    }
    assert view.new_preemptions == 4  # first sight: everything counts
    # What the step did for each, and why the waiting ones got nothing: d, where the scan
    # stopped, for a reason of its own; a, behind it, for the one the whole queue shares; e's
    # waiting sample says nothing while its other one runs.
    assert (got["b"].scheduled_tokens, got["b"].kv_blocks, got["c"].kv_blocks) == (64, 4, 1)
    assert got["e"].wait_reason is None and got["e"].scheduled_tokens == 1
    assert got["d"].wait_reason is not None and got["d"].wait_reason.code == "kv_cache"
    assert got["a"].wait_reason is None
    assert view.queue_reason == WaitReason(
        "behind", "behind d, which vLLM could not schedule (first come, first served)", "d"
    )
    assert got["g"].wait_reason is not None and got["g"].wait_reason.code == "deferred"
    assert view.budget == StepBudget(2048, 64, 2, 60, 100)

    # Nothing changed (the same tokens scheduled again): the record names only the requests
    # scheduled (now and in the step before); no entry changed, no new preemptions.
    capture.after_schedule(scheduler, _output({"b-1": 64, "c-1": 1, "0_e-1": 1}))
    record = sink.records[-1]
    assert not record.full and record.seq == 2
    assert {r.req_id for r in record.requests} == {"b-1", "c-1", "0_e-1", "g-1"}  # g: blocked
    assert view.read(record) == {}
    assert view.new_preemptions == 0

    # b is preempted (computed resets), c finishes and leaves, a starts prefilling.
    requests["b-1"] = FakeRequest(RS.PREEMPTED, 100, 0, 1, request_id="b-1")
    del requests["c-1"]
    requests["a-1"].status = RS.RUNNING
    requests["a-1"].num_computed_tokens = 4
    scheduler.waiting = FakeQueue([requests["b-1"], requests["d-1"], requests["1_e-1"]])
    capture.after_schedule(scheduler, _output({"a-1": 4}, finished={"c-1"}, preempted={"b-1"}))
    record = sink.records[-1]
    assert (record.finished, record.preempted) == (["c-1"], ["b-1"])
    third = view.read(record)
    assert SchedulerEntry(*third["b"][:4]) == SchedulerEntry(S.PREEMPTED, 100, 0, 1)
    assert third["a"] == SchedulerEntry(S.PREFILLING, 10, 4, 0, None, 4)
    assert "c" not in third
    # A step that preempted admits nobody: the whole queue waits for that, d too, and d no
    # longer has a reason of its own.
    assert third["b"].wait_reason is not None
    assert third["b"].wait_reason.text.startswith("preempted this step")
    assert third["d"].wait_reason is None
    assert view.queue_reason is not None
    assert view.queue_reason.text.startswith("KV cache full: this step preempted b,")
    assert view.new_preemptions == 1


def test_a_request_that_only_waits_is_in_no_record_and_costs_no_lookup() -> None:
    from vllm.v1.request import RequestStatus as RS

    class Counted(dict[str, FakeRequest]):
        """The scheduler's request map, counting the capture's lookups."""

        lookups = 0

        def get(self, key: str, default: Any = None) -> Any:
            Counted.lookups += 1
            return super().get(key, default)

    waiting = {f"w{i}-1": FakeRequest(RS.WAITING, 100) for i in range(10_000)}
    running = {f"r{i}-1": FakeRequest(RS.RUNNING, 10, 11, num_output_tokens=1) for i in range(2)}
    requests = Counted({**running, **waiting})
    scheduler = FakeScheduler(requests, order=list(waiting))
    capture, sink = _captured(scheduler, {"r0-1": 1, "r1-1": 1})
    assert len(sink.records[-1].requests) == 10_002  # the first record: everything
    Counted.lookups = 0
    for _ in range(5):
        capture.after_schedule(scheduler, _output({"r0-1": 1, "r1-1": 1}))
        record = sink.records[-1]
        assert {r.req_id for r in record.requests} == {"r0-1", "r1-1"}
        assert record.num_waiting == 0 or record.waiting_head == "w0-1"
    assert Counted.lookups <= 5 * 4  # the two running ones, twice each: none of the 10 000
    capture.arrived("w7-1")  # add_request: named in the next record, once
    capture.after_schedule(scheduler, _output({"r0-1": 1, "r1-1": 1}))
    assert "w7-1" in {r.req_id for r in sink.records[-1].requests}
    capture.after_schedule(scheduler, _output({"r0-1": 1, "r1-1": 1}))
    assert "w7-1" not in {r.req_id for r in sink.records[-1].requests}


def test_missing_internals_mean_unavailable_and_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="stepview.engine.plugin")
    # caplog's handler on the logger itself: an in-process CLI run earlier in the session
    # (launch/logs.py) stops "stepview" records from propagating to the root logger.
    plugin_log = logging.getLogger("stepview.engine.plugin")
    plugin_log.addHandler(caplog.handler)
    propagate, plugin_log.propagate = plugin_log.propagate, False  # each record seen once
    try:
        assert client_id_lookup(SimpleNamespace(engine_core=object())) is None
        odd = CoreCapture(SimpleNamespace(parallel_config=SimpleNamespace()))  # another vLLM
        assert odd.failure is not None and odd.sink is None

        broken = FakeScheduler({"x-1": FakeRequest(object(), 1)})
        capture = CoreCapture(broken)
        capture.sink = sink = ListSink()
        capture.after_schedule(broken, _output({}))  # a foreign status fails: off, no raise
        assert capture.sink is None and capture.failure is not None and sink.closed
        capture.after_schedule(broken, _output({}))
        broken.counts = (0, 0)
        broken.finished_req_ids = {"x-1"}
        capture.after_finish(broken)
        assert sink.records == []
    finally:
        plugin_log.removeHandler(caplog.handler)
        plugin_log.propagate = propagate
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3, messages
    assert "scheduler states unavailable" in messages[0]
    assert all("plug-in switched off" in m for m in messages[1:])


def test_nothing_is_built_while_nobody_listens() -> None:
    class Untouchable(FakeScheduler):
        @property  # type: ignore[override]
        def requests(self) -> dict[str, FakeRequest]:
            raise AssertionError("read while nobody listens")

        @requests.setter
        def requests(self, value: dict[str, FakeRequest]) -> None:
            pass

    scheduler = Untouchable({})
    capture = CoreCapture(scheduler)
    capture.sink = sink = ListSink(wanted=False)
    for _ in range(3):
        capture.after_schedule(scheduler, _output({"a-1": 1}))
    assert capture.step == 3 and sink.records == [] and capture.failure is None


def test_idle_record_when_the_scheduler_empties_and_no_duplicate_finishes() -> None:
    from vllm.v1.request import RequestStatus as RS

    def finish_all() -> tuple[FakeScheduler, CoreCapture, ListSink]:
        requests = {"a-1": FakeRequest(RS.RUNNING, 4, 5, num_output_tokens=1)}
        scheduler = FakeScheduler(requests)
        capture, sink = _captured(scheduler, {"a-1": 1})
        assert sink.records[-1].step == 1 and not sink.records[-1].idle
        capture.after_finish(scheduler)  # a-1 still running: no idle record
        assert len(sink.records) == 1
        del requests["a-1"]
        scheduler.finished_req_ids = {"a-1"}
        scheduler.counts = (0, 0)
        capture.after_finish(scheduler)
        idle = sink.records[-1]
        assert idle.idle and idle.requests == [] and idle.finished == ["a-1"]
        assert idle.step == 1
        return scheduler, capture, sink

    # Multiprocess: the core's next schedule() only passes the finished ids to the workers.
    scheduler, capture, sink = finish_all()
    capture.after_schedule(scheduler, _output({}, finished={"a-1"}))
    assert capture.step == 1 and len(sink.records) == 2  # no record, no step

    # In-process nothing steps an empty engine: the next schedule() brings a new request
    # and vLLM's still pending finished ids, already reported.
    scheduler, capture, sink = finish_all()
    scheduler.requests["b-1"] = FakeRequest(RS.RUNNING, 4, 4)
    scheduler.counts = (1, 0)
    capture.after_schedule(scheduler, _output({"b-1": 4}, finished={"a-1"}))
    last = sink.records[-1]
    assert last.step == 2 and last.finished == [] and [r.req_id for r in last.requests] == ["b-1"]


def test_output_tokens_go_once_as_a_tail_and_again_after_a_fresh_subscription() -> None:
    from vllm import SamplingParams
    from vllm.v1.request import RequestStatus as RS

    params = SamplingParams(
        temperature=0.5, top_k=3, seed=11, stop="END", max_tokens=8, ignore_eos=True
    )
    req = FakeRequest(
        RS.RUNNING,
        3,
        4,
        num_output_tokens=1,
        output_token_ids=[50],
        prompt_token_ids=[1, 2, 3],
        sampling_params=params,
    )
    scheduler = FakeScheduler({"a-1": req})
    capture, sink = _captured(scheduler, {"a-1": 1})
    first = sink.records[-1].requests[0]
    assert first.new_token_ids == [50]
    intro = first.intro
    assert intro is not None and intro.prompt_token_ids == [1, 2, 3]
    assert (intro.temperature, intro.top_k, intro.seed, intro.stop) == (0.5, 3, 11, ["END"])
    assert intro.ignore_eos

    def again(*tokens: int) -> Any:
        req.output_token_ids.extend(tokens)
        req.num_output_tokens = len(req.output_token_ids)
        capture.after_schedule(scheduler, _output({"a-1": 1}))
        return sink.records[-1].requests[0]

    tail = again(51, 52)
    assert (tail.new_token_ids, tail.intro, tail.num_output_tokens) == ([51, 52], None, 3)
    assert again().new_token_ids == []  # nothing new this step
    sink.fresh = True  # someone (re)subscribed: everything again, intro included
    whole = again(53)
    assert whole.new_token_ids == [50, 51, 52, 53] and whole.intro is not None
    assert not sink.fresh
    # A request vLLM does not sample for (pooling) still gets its prompt ids.
    scheduler.requests["p-1"] = FakeRequest(RS.WAITING, 2, prompt_token_ids=[7, 8])
    capture.arrived("p-1")  # (vLLM's add_request, through the plug-in)
    again()
    pooled = next(r for r in sink.records[-1].requests if r.req_id == "p-1")
    assert pooled.intro is not None and pooled.intro.prompt_token_ids == [7, 8]


def test_the_record_after_a_request_ended_carries_its_tokens_and_reason() -> None:
    from vllm.v1.request import RequestStatus as RS

    def request(request_id: str, *tokens: int) -> FakeRequest:
        return FakeRequest(
            RS.RUNNING,
            2,
            2 + len(tokens),
            num_output_tokens=len(tokens),
            output_token_ids=list(tokens),
            request_id=request_id,
        )

    a, b = request("a-1", 50), request("b-1", 60)
    scheduler = FakeScheduler({"a-1": a, "b-1": b})
    capture, sink = _captured(scheduler, {"a-1": 1, "b-1": 1})
    # The update: a-1 gets its last token and finishes (vLLM frees it at once).
    before = capture.before_update(scheduler, _output({"a-1": 1, "b-1": 1}))
    assert before is not None
    a.output_token_ids.append(51)
    a.num_output_tokens, a.status, a.stop_reason = 2, RS.FINISHED_STOPPED, 7
    del scheduler.requests["a-1"]
    scheduler.finished_req_ids = {"a-1"}
    capture.after_update(scheduler, before, _output({"a-1": 1, "b-1": 1}), {})
    # b-1 is aborted between steps (its client went away), with a token never sent.
    b.output_token_ids.append(61)
    b.num_output_tokens, b.status = 2, RS.FINISHED_ABORTED
    del scheduler.requests["b-1"]
    scheduler.finished_req_ids = {"a-1", "b-1"}
    scheduler.counts = (0, 0)
    capture.after_abort(scheduler, [b])
    idle = sink.records[-1]
    assert idle.idle and idle.finished == ["a-1", "b-1"]
    assert [
        (e.req_id, e.num_output_tokens, e.output_token_ids, e.finish_reason, e.stop_reason)
        for e in idle.ended
    ] == [("a-1", 2, [50, 51], "stop", 7), ("b-1", 2, [60, 61], "abort", None)]
    # Nobody listening: nothing is copied or kept.
    sink.want = False
    capture.after_schedule(scheduler, _output({"c-1": 1}))
    assert capture.before_update(scheduler, _output({"c-1": 1})) is None


# -- chaining to a user's scheduler ----------------------------------------------------------


def test_base_class_rules() -> None:
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler

    def config(async_scheduling: bool) -> Any:
        return SimpleNamespace(scheduler_config=SimpleNamespace(async_scheduling=async_scheduling))

    # What vLLM itself would pick: AsyncScheduler by default on GPUs, Scheduler on CPU.
    assert resolve_base(None, config(True)) is AsyncScheduler
    assert resolve_base(None, config(False)) is Scheduler
    assert chained_class(Scheduler) is StepviewScheduler
    chained = chained_class(AsyncScheduler)
    assert chained.__mro__[1:4] == (StepviewScheduler, AsyncScheduler, Scheduler)
    assert chained_class(AsyncScheduler) is chained  # made once

    user = "tests.engine.plugin.gated_scheduler.GatedScheduler"
    assert resolve_base(user, config(True)) is GatedScheduler
    assert user_scheduler_base(user) == user
    assert user_scheduler_base(GatedScheduler) == user
    assert user_scheduler_base(None) is None
    assert user_scheduler_base(PLUGIN_QUALNAME) is None  # already the plug-in: nothing to chain
    for bad, message in (
        ("tests.engine.plugin.gated_scheduler.NotAScheduler", "can only extend a subclass"),
        ("tests.engine.no_such_module.X", "cannot load"),
        ("collections.OrderedDict", "can only extend a subclass"),
    ):
        with pytest.raises(ValueError, match=message):
            user_scheduler_base(bad)
    with pytest.raises(ValueError, match="already is"):
        resolve_base(PLUGIN_QUALNAME, None)


def test_a_bad_scheduler_class_is_refused_before_any_engine_starts(engines: EnginePool) -> None:
    from stepview.engine.own.tiny_model import TINY_MODEL_NAME, tiny_engine_args
    from stepview.engine.own.vllm_engine import VllmEngine

    args = tiny_engine_args(scheduler_cls="tests.engine.plugin.gated_scheduler.NotAScheduler")
    started = time.monotonic()
    with pytest.raises(ValueError, match="NotAScheduler"):
        VllmEngine.create(args, demo_model=True, model_label=TINY_MODEL_NAME)
    assert time.monotonic() - started < 2.0  # refused up front, no engine built


def test_a_users_scheduler_class_is_chained(engines: EnginePool) -> None:
    engine = engines.get(scheduler_cls="tests.engine.plugin.gated_scheduler.GatedScheduler")
    assert engine.info.detailed_states
    scheduler = engine.llm_engine.engine_core.engine_core.scheduler
    mro = type(scheduler).__mro__
    assert mro.index(StepviewScheduler) < mro.index(GatedScheduler)
    engine.add_request("u0", "def f(x):", SamplingSpec(temperature=0, max_tokens=3))
    first = engine.step()
    assert first.scheduled is not None and first.scheduled["u0"].state is S.DECODING
    assert _run(engine)[-1].scheduled == {}  # finished: left the view


# -- behaviour, on real vLLM -----------------------------------------------------------------


def _run(engine: Any, max_steps: int = 2000) -> list[StepResult]:
    results: list[StepResult] = []
    for _ in range(max_steps):
        if not engine.has_unfinished():
            return results
        results.append(engine.step())
    raise AssertionError("requests did not finish")


def _check_counters_agree(result: StepResult, book: Entries) -> None:
    """vLLM's own counts agree with the entries (each step's changes on what came before)."""
    states = [e.state for e in book.apply(result).entries.values()]
    assert result.counters.running == sum(s in RUNNING_STATES for s in states)
    assert result.counters.waiting == sum(s in QUEUED_STATES for s in states)


def test_requests_wait_while_max_num_seqs_run(engines: EnginePool) -> None:
    engine = engines.get(max_num_seqs=4)
    for i in range(8):
        engine.add_request(
            f"w{i}", f"def f{i}(x): return x", SamplingSpec(temperature=0, max_tokens=6)
        )
    first = engine.step()
    assert first.scheduled is not None
    assert set(first.scheduled) == {f"w{i}" for i in range(8)}
    states = [first.scheduled[f"w{i}"].state for i in range(8)]
    assert states[:4] == [S.DECODING] * 4  # first come, first served
    assert states[4:] == [S.WAITING] * 4
    assert first.counters.running == 4 and first.counters.waiting == 4
    assert {o.request_id for o in first.outputs} == {f"w{i}" for i in range(4)}
    assert first.counters.generation_tokens == 4

    results = [first, *_run(engine)]
    finished = set()
    book = Entries()
    for result in results:
        _check_counters_agree(result, book)
        assert result.counters.running <= 4
        finished |= {o.request_id for o in result.outputs if o.finished}
    assert finished == {f"w{i}" for i in range(8)}
    assert any(
        r.scheduled and r.scheduled.get("w7", None) and r.scheduled["w7"].state is S.DECODING
        for r in results
    )


def test_abort_removes_waiting_and_running_requests(engines: EnginePool) -> None:
    engine = engines.get(max_num_seqs=4)
    for i in range(6):
        engine.add_request(f"a{i}", "def g(): pass", SamplingSpec(temperature=0, max_tokens=20))
    result = engine.step()
    assert result.scheduled is not None
    assert result.scheduled["a0"].state is S.DECODING
    assert result.scheduled["a5"].state is S.WAITING
    engine.abort(["a0", "a5", "never-added"])
    seen: set[str] = set()
    book = Entries().apply(result)
    book.forget(["a0", "a5"])  # as the ledger does on an abort
    for result in _run(engine):
        assert result.scheduled is not None
        assert "a0" not in result.scheduled and "a5" not in result.scheduled
        seen |= {o.request_id for o in result.outputs if o.finished}
        _check_counters_agree(result, book)
    assert seen == {"a1", "a2", "a3", "a4"}


def test_chunked_prefill_progress(engines: EnginePool) -> None:
    chunk = 64
    engine = engines.get(max_num_batched_tokens=chunk)
    prompt = "def foo(x): return x + " * 40  # ~360 tokens with the demo tokenizer
    engine.add_request("long", prompt, SamplingSpec(temperature=0, max_tokens=3))
    progress: list[int] = []
    total = 0
    book = Entries()
    while True:
        result = engine.step()
        assert result.scheduled is not None
        entry = result.scheduled["long"]  # it changes every step: in every step's entries
        total = entry.prompt_tokens
        if entry.state is not S.PREFILLING:
            break
        assert entry.computed_prompt_tokens < total
        assert result.outputs == ()  # a prefill chunk produces no output
        assert result.counters.prompt_tokens == chunk  # this step's prompt work
        _check_counters_agree(result, book)
        progress.append(entry.computed_prompt_tokens)
    assert total > 4 * chunk
    assert progress == [chunk * (i + 1) for i in range(len(progress))]
    assert len(progress) == (total - 1) // chunk
    assert entry.state is S.DECODING and entry.computed_prompt_tokens == total
    assert [o.request_id for o in result.outputs] == ["long"]
    assert result.counters.prompt_tokens == total - len(progress) * chunk
    _run(engine)


# Smallest KV cache the engine accepts with max_model_len=512 and 128-token blocks: 5 blocks
# (one is vLLM's null block), i.e. 4 x 128 usable tokens = one full-length sequence.
# 512 KiB (4 blocks) fails at start-up with "To serve at least one request ...".
TINY_KV_BYTES = 5 * 128 * 1024


def test_tiny_kv_cache_forces_preemption(engines: EnginePool) -> None:
    engine = engines.get(kv_cache_memory_bytes=TINY_KV_BYTES)
    prompt = "def foo(x): return x + " * 20  # ~180 tokens: two of them fill the cache
    for i in range(4):
        engine.add_request(f"p{i}", prompt, SamplingSpec(temperature=0, max_tokens=160))
    results = _run(engine)
    preempted_seen: dict[str, SchedulerEntry] = {}
    last_preemptions: dict[str, int] = {}
    finished = {}
    book = Entries()
    for result in results:
        _check_counters_agree(result, book)
        assert result.scheduled is not None
        for rid, entry in result.scheduled.items():
            last_preemptions[rid] = entry.num_preemptions
            if entry.state is S.PREEMPTED:
                preempted_seen.setdefault(rid, entry)
        for out in result.outputs:
            if out.finished:
                finished[out.request_id] = list(out.completions[0].token_ids)
    assert preempted_seen, "no request was preempted"
    for entry in preempted_seen.values():
        assert entry.num_preemptions >= 1
        assert entry.computed_prompt_tokens == 0  # its KV cache was freed
    total = sum(last_preemptions.values())
    assert total >= 1
    assert sum(r.counters.preemptions for r in results) == total
    # Preemption costs time, never tokens: every request still produced all of them.
    assert sorted(finished) == [f"p{i}" for i in range(4)]
    assert all(len(tokens) == 160 for tokens in finished.values())


@pytest.fixture
def busy_scheduler(engines: EnginePool) -> Iterator[tuple[Any, Any]]:
    """An in-process engine with 64 requests scheduled, and its (plug-in) scheduler."""
    engine = engines.get(max_num_seqs=64)
    for i in range(64):
        engine.add_request(f"c{i}", f"x = {i}", SamplingSpec(temperature=0, max_tokens=8))
    result = engine.step()
    assert result.scheduled is not None and len(result.scheduled) == 64
    yield engine, engine.llm_engine.engine_core.engine_core.scheduler
    engine.abort([f"c{i}" for i in range(64)])


def test_capture_cost_stays_small(busy_scheduler: tuple[Any, Any]) -> None:
    engine, scheduler = busy_scheduler
    capture: CoreCapture = scheduler._stepview
    lookup = client_id_lookup(engine.llm_engine)
    assert lookup is not None
    view = EntryReader(lookup)
    rounds = 200
    scheduled = {rid: 1 for rid in scheduler.requests}  # a step that decodes all 64
    start = time.perf_counter()
    for _ in range(rounds):
        facts = capture.capture(scheduler, scheduled, [], [], False)
    per_capture = (time.perf_counter() - start) / rounds
    start = time.perf_counter()
    for _ in range(rounds):
        view.read(facts)
    per_read = (time.perf_counter() - start) / rounds
    assert len(facts.requests) == 64
    # Measured ~60 us to capture and ~30 us to read 64 requests on 2 shared cores.
    assert per_capture < 1e-3 and per_read < 1e-3
