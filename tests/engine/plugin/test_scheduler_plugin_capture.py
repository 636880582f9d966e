"""The scheduler plug-in's capture, by its rules, on fake schedulers (no engine started).

What a step's record holds (states, KV blocks, budgets, why requests wait), what only
waiting costs, what happens when vLLM's internals are not the expected ones or nobody
listens, idle records, token tails, and how the record after a request ended says how.
test_scheduler_plugin_real.py checks the same plug-in on real vLLM.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from stepview.engine.plugin.capture import CoreCapture
from stepview.engine.plugin.client_side import client_id_lookup
from stepview.engine.records.entries import EntryReader
from stepview.engine.records.request_states import CoreState
from stepview.model.engine_api import SchedulerEntry
from stepview.model.scheduling import StepBudget, WaitReason
from stepview.model.snapshot import RequestState
from tests.engine.plugin.fake_scheduler import (
    MODEL,
    FakeQueue,
    FakeRequest,
    FakeScheduler,
    ListSink,
    _captured,
    _output,
)

pytestmark = pytest.mark.engine

S = RequestState


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

    assert sink.records[-1].full and sink.records[-1].model == MODEL  # named in full ones
    tail = again(51, 52)
    assert (tail.new_token_ids, tail.intro, tail.num_output_tokens) == ([51, 52], None, 3)
    assert not sink.records[-1].full and sink.records[-1].model == ""  # only
    assert again().new_token_ids == []  # nothing new this step
    sink.fresh = True  # someone (re)subscribed: everything again, intro included
    whole = again(53)
    assert whole.new_token_ids == [50, 51, 52, 53] and whole.intro is not None
    assert sink.records[-1].model == MODEL
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


def test_an_ending_goes_out_in_one_record_once_and_endings_in_scheduling_order() -> None:
    """Two bugs the conformance probe of issue 28 found: a record made with no endings held
    the capture's own (empty) list, so an ending kept after it went out in that record too
    when a publisher serialized it late (records go in batches); and endings left in the
    order of a set, so the same steps gave records in a different order from run to run."""
    from vllm.v1.request import RequestStatus as RS

    ids = [f"r{i}-1" for i in (3, 1, 4, 0, 2)]  # the step's scheduling order
    requests = {
        i: FakeRequest(RS.RUNNING, 2, 3, num_output_tokens=1, output_token_ids=[5], request_id=i)
        for i in ids
    }
    scheduler = FakeScheduler(dict(requests))
    step = {i: 1 for i in ids}
    capture, sink = _captured(scheduler, step)
    first = sink.records[-1]
    assert first.ended == []
    before = capture.before_update(scheduler, _output(step))
    assert before is not None
    for i in ids:  # every one finishes in this update
        requests[i].status = RS.FINISHED_STOPPED
        del scheduler.requests[i]
    scheduler.finished_req_ids = set(reversed(ids))
    capture.after_update(scheduler, before, _output(step), {})
    assert first.ended == []  # the record sent before holds none of them
    scheduler.requests["n-1"] = FakeRequest(RS.RUNNING, 2, 2, request_id="n-1")
    capture.after_schedule(scheduler, _output({"n-1": 1}, finished=ids))
    assert [e.req_id for e in sink.records[-1].ended] == ids
