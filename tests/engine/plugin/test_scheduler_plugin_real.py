"""The scheduler plug-in on real vLLM: chaining to a user's scheduler, and the view it gives.

The base-class rules (which scheduler the plug-in extends, and which classes it refuses),
a user's scheduler chained under it, then the view built on it while real vLLM makes
requests wait, aborts them, prefills in chunks and preempts, and what capturing costs.
The real-engine tests here run the engine core in this process (the plug-in's in-process
listener); tests/engine/own/test_multiprocess.py runs the same plug-in in a core process.
test_scheduler_plugin_capture.py checks the capture's rules on fake schedulers.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from stepview.engine.plugin.capture import CoreCapture
from stepview.engine.plugin.client_side import client_id_lookup
from stepview.engine.plugin.config import PLUGIN_QUALNAME, resolve_base, user_scheduler_base
from stepview.engine.plugin.scheduler import StepviewScheduler, chained_class
from stepview.engine.records.entries import EntryReader
from stepview.engine.records.request_states import CoreState
from stepview.model.engine_api import SchedulerEntry, StepResult
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState
from tests.engine.plugin.gated_scheduler import GatedScheduler
from tests.helpers import TINY_KV_BYTES, Entries
from tests.vllm_engines import EnginePool

pytestmark = pytest.mark.engine

S = RequestState
RUNNING_STATES = {S.PREFILLING, S.DECODING}
QUEUED_STATES = {S.WAITING, S.PREEMPTED}


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


def test_a_bad_scheduler_class_is_refused_before_any_engine_starts(
    engines: EnginePool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vllm import LLMEngine

    from stepview.engine.own.tiny_model import TINY_MODEL_NAME, tiny_engine_args
    from stepview.engine.own.vllm_engine import VllmEngine

    built: list[object] = []

    def build(*args: object, **kwargs: object) -> None:
        built.append(args)
        raise AssertionError("an engine was built for a scheduler class it refuses")

    monkeypatch.setattr(LLMEngine, "from_engine_args", build)
    args = tiny_engine_args(scheduler_cls="tests.engine.plugin.gated_scheduler.NotAScheduler")
    with pytest.raises(ValueError, match="NotAScheduler"):
        VllmEngine.create(args, demo_model=True, model_label=TINY_MODEL_NAME)
    assert built == []  # refused up front: no engine was built


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


def test_a_step_of_64_requests_is_captured_and_read(busy_scheduler: tuple[Any, Any]) -> None:
    """Each request the scheduler holds in the record, as the scheduler has it, and in the
    reader's entries under the caller's id. (What capturing and reading cost per step is
    benchmarks/capture_cost.py's figure, measured from 64 to 8 192 requests.)"""
    engine, scheduler = busy_scheduler
    capture: CoreCapture = scheduler._stepview
    lookup = client_id_lookup(engine.llm_engine)
    assert lookup is not None
    view = EntryReader(lookup)
    held = scheduler.requests
    running = {request.request_id for request in scheduler.running}
    assert running and len(running) < 64  # fewer KV blocks than requests: the others wait
    prompts = {lookup(core_id): request.num_prompt_tokens for core_id, request in held.items()}
    assert sorted(prompts) == sorted(f"c{i}" for i in range(64))
    scheduled = {core_id: 1 for core_id in held}  # a token for each of the 64
    reads = []
    for _ in range(3):  # the same step again and again: each record has every request
        facts = capture.capture(scheduler, scheduled, [], [], False)
        assert sorted(r.req_id for r in facts.requests) == sorted(held)
        for r in facts.requests:
            request = held[r.req_id]
            state = CoreState.RUNNING if r.req_id in running else CoreState.WAITING
            assert (r.state, r.num_scheduled_tokens) == (state, 1), r
            assert r.num_prompt_tokens == request.num_prompt_tokens
            assert r.num_computed_tokens == request.num_computed_tokens
        reads.append(view.read(facts))
    entries, *again = reads
    assert again == [{}, {}]  # the reader gives what changed: nothing did
    assert sorted(entries) == sorted(prompts)
    for core_id in held:
        entry = entries[rid := lookup(core_id)]
        assert entry.prompt_tokens == prompts[rid]
        assert entry.scheduled_tokens == 1 and entry.num_preemptions == 0
        if core_id in running:
            assert entry.state in RUNNING_STATES, (rid, entry)
            assert entry.kv_blocks >= 1
        else:
            assert entry.state is S.WAITING, (rid, entry)
