"""VllmEngine against real vLLM on the demo model: outputs, rejections, counters, lifecycle."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from stepview.engine.own.tiny_model import TINY_MODEL_NAME, tiny_engine_args
from stepview.engine.own.vllm_engine import VllmEngine
from stepview.model.engine_api import CompletionUpdate, EngineRejected, OutputUpdate, StepResult
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import LogprobEntry, RequestState
from tests.vllm_engines import EnginePool

pytestmark = pytest.mark.engine

GREEDY_PROMPTS = {
    "g0": "def add(a, b):",
    "g1": "import os\nimport sys\n",
    "g2": "class Parser:\n    def __init__(self):",
    "g3": "x = [i * i for i in range(10)]",
}


def _run(engine: VllmEngine, max_steps: int = 2000) -> list[StepResult]:
    results: list[StepResult] = []
    for _ in range(max_steps):
        if not engine.has_unfinished():
            return results
        results.append(engine.step())
    raise AssertionError("requests did not finish")


def _final_completions(results: list[StepResult]) -> dict[str, dict[int, list[int]]]:
    """request id -> sample index -> token ids, from the latest update of each sample."""
    out: dict[str, dict[int, list[int]]] = {}
    for result in results:
        for update in result.outputs:
            for c in update.completions:
                out.setdefault(update.request_id, {})[c.index] = list(c.token_ids)
    return out


def test_info_and_startup_phases(engines: EnginePool) -> None:
    engine = engines.get()
    info = engine.info
    assert info.model == TINY_MODEL_NAME and info.demo_model
    assert info.vllm_version.startswith("0.")
    assert (info.max_model_len, info.max_num_seqs, info.max_logprobs) == (512, 32, 20)
    assert info.detailed_states is True
    phases = engines.phases
    # "importing vLLM" only when vLLM was not imported yet (it was, by tiny_engine_args).
    expected = ["reading model config", "loading weights", "allocating KV cache"]
    assert [p for p in phases if p in expected] == expected, phases


def test_rejections_carry_vllms_message_and_leave_engine_usable(engines: EnginePool) -> None:
    engine = engines.get()
    cases = {
        "temperature must be non-negative": ("hi", SamplingSpec(temperature=-1)),
        "top_p must be in (0, 1]": ("hi", SamplingSpec(top_p=1.5)),
        "n must be at least 1": ("hi", SamplingSpec(n=0)),
        "max_tokens must be at least 1": ("hi", SamplingSpec(max_tokens=0)),
        "maximum context length is 512": ("def foo(x): return x + " * 60, SamplingSpec()),
        "prompt cannot be empty": ("", SamplingSpec()),
        "greater than max allowed: 20": ("hi", SamplingSpec(logprobs=21)),
        "n must be 1 when using greedy": ("hi", SamplingSpec(temperature=0, n=2)),
    }
    for i, (message, (prompt, spec)) in enumerate(cases.items()):
        with pytest.raises(EngineRejected, match=None) as info:
            engine.add_request(f"bad{i}", prompt, spec)
        assert message in str(info.value), str(info.value)
    assert not engine.has_unfinished()

    engine.add_request("ok1", "hello", SamplingSpec(temperature=0, max_tokens=4))
    engine.add_request("ok2", "world", SamplingSpec(temperature=0.7, seed=3, max_tokens=4))
    results = _run(engine)
    finished = {u.request_id for r in results for u in r.outputs if u.finished}
    assert finished == {"ok1", "ok2"}


def test_n2_logprobs_and_prompt_logprobs(engines: EnginePool) -> None:
    engine = engines.get()
    spec = SamplingSpec(temperature=0.8, seed=11, n=2, max_tokens=5, logprobs=3, prompt_logprobs=2)
    engine.add_request("n2", "for item in items:", spec)
    latest: dict[int, CompletionUpdate] = {}
    copied: dict[int, tuple[list[int], list[Any]]] = {}
    updates: list[OutputUpdate] = []
    scheduled_keys: set[str] = set()
    for result in _run(engine):
        if result.scheduled:
            scheduled_keys |= set(result.scheduled)
            assert result.scheduled["n2"].state is RequestState.DECODING
        for update in result.outputs:
            assert update.request_id == "n2"
            updates.append(update)
            for c in update.completions:
                latest[c.index] = c
                # Copy now, as the driver does: the sequences are live until the next step.
                assert c.logprobs is not None
                copied[c.index] = (list(c.token_ids), list(c.logprobs))
    assert scheduled_keys == {"n2"}  # children merged under the caller's id
    assert set(latest) == {0, 1}
    assert updates[-1].finished and not any(u.finished for u in updates[:-1])
    for index, (tokens, logprobs) in copied.items():
        assert len(tokens) == 5 and len(logprobs) == 5
        assert latest[index].cumulative_logprob is not None
        assert latest[index].finish_reason == "length"
        for token, position in zip(tokens, logprobs, strict=True):
            assert isinstance(position, tuple)
            assert all(isinstance(entry, LogprobEntry) for entry in position)
            assert position[0].token_id == token  # the sampled token comes first
            assert position[0].rank is not None and position[0].rank >= 1
            assert 3 <= len(position) <= 4  # top-3 plus the sampled token if not among them
            assert {e.rank for e in position[1:]} <= {1, 2, 3}
            assert position[0].decoded is not None

    prompt_ids = list(updates[0].prompt_token_ids or [])
    prompt_logprobs = updates[0].prompt_logprobs
    assert prompt_logprobs is not None and len(prompt_logprobs) == len(prompt_ids)
    assert prompt_logprobs[0] is None  # nothing precedes the first prompt token
    for token, position in zip(prompt_ids[1:], prompt_logprobs[1:], strict=True):
        assert position is not None and position[0].token_id == token
        assert 2 <= len(position) <= 3
    # Converted once: every later output hands out the same tuple.
    assert all(u.prompt_logprobs is prompt_logprobs for u in updates)


def test_logprobs_view_is_lazy_and_sliceable(engines: EnginePool) -> None:
    engine = engines.get()
    engine.add_request("lp", "while True:", SamplingSpec(temperature=0, max_tokens=6, logprobs=1))
    results = _run(engine)
    (final,) = [u for r in results for u in r.outputs if u.finished]
    logprobs = final.completions[0].logprobs
    assert logprobs is not None and len(logprobs) == 6
    assert logprobs[-1] == logprobs[5] == tuple(logprobs)[5]
    assert list(logprobs[2:4]) == [logprobs[2], logprobs[3]]
    with pytest.raises(IndexError):
        logprobs[6]


def test_idle_step_has_no_stale_counters(engines: EnginePool) -> None:
    engine = engines.get()
    engine.add_request("i1", "pass", SamplingSpec(temperature=0, max_tokens=3))
    busy = engine.step()
    assert busy.counters.running == 1 and busy.counters.generation_tokens == 1
    assert busy.counters.prompt_tokens > 0 and busy.counters.kv_cache_usage > 0
    _run(engine)
    idle = engine.step()
    assert idle.outputs == () and idle.scheduled == {}
    counters = idle.counters
    assert (counters.running, counters.waiting, counters.kv_cache_usage) == (0, 0, 0.0)
    assert (counters.prompt_tokens, counters.generation_tokens, counters.preemptions) == (0, 0, 0)
    assert counters.prefix_cache_queries >= busy.counters.prefix_cache_queries > 0


def test_greedy_tokens_match_a_bare_llm_engine(engines: EnginePool) -> None:
    engine = engines.get()
    for rid, prompt in GREEDY_PROMPTS.items():
        engine.add_request(rid, prompt, SamplingSpec(temperature=0, max_tokens=24))
    ours = {rid: c[0] for rid, c in _final_completions(_run(engine)).items()}
    assert set(ours) == set(GREEDY_PROMPTS)

    engines.release()  # one live engine per process (see conftest)
    from vllm import LLMEngine, SamplingParams

    bare = LLMEngine.from_engine_args(tiny_engine_args())
    try:
        for rid, prompt in GREEDY_PROMPTS.items():
            bare.add_request(rid, prompt, SamplingParams(temperature=0, max_tokens=24))
        theirs: dict[str, list[int]] = {}
        while bare.has_unfinished_requests():
            for out in bare.step():
                theirs[out.request_id] = list(out.outputs[0].token_ids)  # type: ignore[index]
    finally:
        bare.engine_core.shutdown()
    assert ours == theirs
    assert all(len(tokens) > 0 for tokens in ours.values())


def test_shutdown_is_clean_and_idempotent_and_stats_stay_on(engines: EnginePool) -> None:
    engines.release()
    before = {t.ident for t in threading.enumerate()}
    # disable_log_stats would leave the counters empty: create() turns stats back on.
    args = tiny_engine_args(disable_log_stats=True)
    engine = VllmEngine.create(args, demo_model=True, model_label="x")
    assert args.disable_log_stats is True  # the caller's args are not modified
    engine.add_request("s", "pass", SamplingSpec(temperature=0, max_tokens=2))
    assert engine.step().counters.running == 1
    _run(engine)
    engine.shutdown()
    engine.shutdown()
    leftover = [t.name for t in threading.enumerate() if t.ident not in before]
    assert leftover == []
    with pytest.raises(RuntimeError):
        engine.step()
