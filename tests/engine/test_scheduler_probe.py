"""The scheduler probe: on fake scheduler objects (rules), then on real vLLM (behaviour)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from stepview.engine.scheduler_probe import SchedulerProbe
from stepview.model.engine_api import SchedulerEntry, StepResult
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState

from .conftest import EnginePool

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


def _fake_engine(requests: dict[str, FakeRequest], external: dict[str, str]) -> Any:
    scheduler = SimpleNamespace(requests=requests)
    states = {k: SimpleNamespace(external_req_id=v) for k, v in external.items()}
    return SimpleNamespace(
        engine_core=SimpleNamespace(engine_core=SimpleNamespace(scheduler=scheduler)),
        output_processor=SimpleNamespace(request_states=states),
    )


def test_states_merging_and_preemption_count_on_fakes() -> None:
    from vllm.v1.request import RequestStatus as RS

    requests = {
        "a-1": FakeRequest(RS.WAITING, 10),
        "b-1": FakeRequest(RS.RUNNING, 100, 64),
        "c-1": FakeRequest(RS.RUNNING, 10, 15),
        "d-1": FakeRequest(RS.PREEMPTED, 10, 0, 1),
        "0_e-1": FakeRequest(RS.RUNNING, 10, 12),
        "1_e-1": FakeRequest(RS.PREEMPTED, 10, 0, 2),
        "f-1": FakeRequest(RS.FINISHED_STOPPED, 10, 20),
        "g-1": FakeRequest(RS.WAITING_FOR_REMOTE_KVS, 10, 0, 1),
        "orphan-1": FakeRequest(RS.RUNNING, 10, 10),  # no output state: being aborted
    }
    external = {
        k: k.split("_", 1)[-1].rsplit("-", 1)[0] for k in requests if not k.startswith("orphan")
    }
    probe = SchedulerProbe(_fake_engine(requests, external))
    assert probe.available
    got = probe.read()
    assert got == {
        "a": SchedulerEntry(S.WAITING, 10, 0, 0),
        "b": SchedulerEntry(S.PREFILLING, 100, 64, 0),
        "c": SchedulerEntry(S.DECODING, 10, 10, 0),  # computed includes decoded tokens
        "d": SchedulerEntry(S.PREEMPTED, 10, 0, 1),
        "e": SchedulerEntry(S.DECODING, 10, 10, 2),  # most advanced child, preemptions summed
        "g": SchedulerEntry(S.PREEMPTED, 10, 0, 1),
    }
    assert probe.new_preemptions == 4  # first sight: everything counts

    # Nothing changed: the very same entry objects come back, no new preemptions.
    again = probe.read()
    assert again is not None and again is not got
    assert all(again[k] is got[k] for k in got)
    assert probe.new_preemptions == 0

    # b is preempted (computed resets), c finishes and leaves, a starts prefilling.
    requests["b-1"] = FakeRequest(RS.PREEMPTED, 100, 0, 1)
    del requests["c-1"]
    requests["a-1"].status = RS.RUNNING
    requests["a-1"].num_computed_tokens = 4
    third = probe.read()
    assert third is not None
    assert third["b"] == SchedulerEntry(S.PREEMPTED, 100, 0, 1)
    assert third["a"] == SchedulerEntry(S.PREFILLING, 10, 4, 0)
    assert "c" not in third
    assert third["d"] is again["d"]
    assert probe.new_preemptions == 1


def test_missing_internals_mean_unavailable_and_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="stepview.engine.scheduler_probe")
    logging.getLogger("stepview.engine").propagate = True  # let caplog see it
    try:
        probe = SchedulerProbe(SimpleNamespace(engine_core=object()))  # multiprocess-like
        assert not probe.available
        assert probe.read() is None
        assert probe.read() is None

        broken = _fake_engine({"x-1": FakeRequest(object(), 1)}, {"x-1": "x"})
        probe2 = SchedulerProbe(broken)
        assert probe2.available
        assert probe2.read() is None  # comparing a foreign status fails: gives up, no raise
        assert not probe2.available
        assert probe2.read() is None
    finally:
        logging.getLogger("stepview.engine").propagate = False
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert all("scheduler states unavailable" in m for m in messages)


# -- behaviour, on real vLLM -----------------------------------------------------------------


def _run(engine: Any, max_steps: int = 2000) -> list[StepResult]:
    results: list[StepResult] = []
    for _ in range(max_steps):
        if not engine.has_unfinished():
            return results
        results.append(engine.step())
    raise AssertionError("requests did not finish")


def _check_counters_agree(result: StepResult) -> None:
    assert result.scheduled is not None
    states = [e.state for e in result.scheduled.values()]
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
    for result in results:
        _check_counters_agree(result)
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
    for result in _run(engine):
        assert result.scheduled is not None
        assert "a0" not in result.scheduled and "a5" not in result.scheduled
        seen |= {o.request_id for o in result.outputs if o.finished}
        _check_counters_agree(result)
    assert seen == {"a1", "a2", "a3", "a4"}


def test_chunked_prefill_progress(engines: EnginePool) -> None:
    chunk = 64
    engine = engines.get(max_num_batched_tokens=chunk)
    prompt = "def foo(x): return x + " * 40  # ~360 tokens with the demo tokenizer
    engine.add_request("long", prompt, SamplingSpec(temperature=0, max_tokens=3))
    progress: list[int] = []
    total = 0
    while True:
        result = engine.step()
        assert result.scheduled is not None
        entry = result.scheduled["long"]
        total = entry.prompt_tokens
        if entry.state is not S.PREFILLING:
            break
        assert entry.computed_prompt_tokens < total
        assert result.outputs == ()  # a prefill chunk produces no output
        assert result.counters.prompt_tokens == chunk  # this step's prompt work
        _check_counters_agree(result)
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
    for result in results:
        _check_counters_agree(result)
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


def test_probe_cost_stays_small(engines: EnginePool) -> None:
    engine = engines.get(max_num_seqs=64)
    for i in range(64):
        engine.add_request(f"c{i}", f"x = {i}", SamplingSpec(temperature=0, max_tokens=8))
    result = engine.step()
    assert result.scheduled is not None and len(result.scheduled) == 64
    probe = engine._probe
    rounds = 200
    start = time.perf_counter()
    for _ in range(rounds):
        probe.read()
    per_read = (time.perf_counter() - start) / rounds
    assert per_read < 1e-3  # measured ~20 us for 64 requests on 2 cores
    engine.abort([f"c{i}" for i in range(64)])
