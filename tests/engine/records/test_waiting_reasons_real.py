"""Real vLLM on the demo model: each waiting situation gets the reason vLLM's scheduler had.

Few requests, few tokens: each test builds the situation, runs it to the end and checks the
reason every waiting request was given on the way.
"""

from __future__ import annotations

import pytest

from stepview.engine.own.vllm_engine import VllmEngine
from stepview.model.engine_api import StepResult
from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import BEHIND, KV_CACHE, MAX_NUM_SEQS, TOKEN_BUDGET
from stepview.model.snapshot import RequestState as S
from tests.helpers import TINY_KV_BYTES, Entries
from tests.vllm_engines import EnginePool

_WAITS = (S.WAITING, S.PREEMPTED)


def _run(engine: VllmEngine, limit: int = 2000) -> list[StepResult]:
    results = []
    for _ in range(limit):
        if not engine.has_unfinished():
            break
        results.append(engine.step())
    assert not engine.has_unfinished()
    return results


def _waiting(results: list[StepResult]) -> list[tuple[int, str, S, str, str, str | None]]:
    """(step, id, state, reason code, text, blocker) of every waiting request, step by step
    (its own reason, or its queue's: every one that waits has one)."""
    rows = []
    book = Entries()
    for i, result in enumerate(results):
        book.apply(result)
        for rid, entry in book.entries.items():
            if entry.state in _WAITS:
                reason = book.reason(rid)
                assert reason is not None, f"{rid} waits without a reason at step {i}"
                rows.append((i, rid, entry.state, reason.code, reason.text, reason.blocker))
            else:
                assert entry.wait_reason is None
    return rows


@pytest.mark.parametrize("multiprocess", [False, True], ids=["in-process", "core-process"])
def test_all_running_slots_taken(engines: EnginePool, multiprocess: bool) -> None:
    engine = engines.get(multiprocess=multiprocess, max_num_seqs=2)
    for i in range(6):
        engine.add_request(f"s{i}", f"def f{i}(x): return x", SamplingSpec(max_tokens=3))
    results = _run(engine)
    rows = _waiting(results)
    assert rows, "nobody waited"
    assert {code for _, _, _, code, _, _ in rows} == {MAX_NUM_SEQS}
    assert "all 2 running slots taken" in rows[0][4]
    assert {rid for _, rid, *_ in rows} >= {"s2", "s3", "s4", "s5"}
    budgets = [r.budget for r in results if r.budget is not None]
    assert budgets and all(b.max_tokens > 0 and b.total_blocks > 0 for b in budgets)
    assert any(b.decode_tokens == 2 for b in budgets)


def test_chunked_prefill_spends_the_budget(engines: EnginePool) -> None:
    engine = engines.get(max_num_batched_tokens=64)
    engine.add_request("long", "def foo(x): return x + " * 40, SamplingSpec(max_tokens=2))
    engine.add_request("next", "x = 1", SamplingSpec(max_tokens=2))
    results = _run(engine)
    rows = [row for row in _waiting(results) if row[1] == "next"]
    assert rows and all(code == TOKEN_BUDGET for _, _, _, code, _, _ in rows)
    assert rows[0][4] == "budget 64 spent: 64 prefill, 0 decode"
    first = results[0]
    assert first.scheduled is not None and first.scheduled["long"].scheduled_tokens == 64
    assert first.budget is not None and first.budget.prefill_tokens == 64


def test_tiny_kv_cache_kv_reasons_preemption_and_behind(engines: EnginePool) -> None:
    engine = engines.get(kv_cache_memory_bytes=TINY_KV_BYTES)
    prompt = "def foo(x): return x + " * 20  # ~180 tokens: two of them fill the cache
    for i in range(4):
        engine.add_request(f"p{i}", prompt, SamplingSpec(temperature=0, max_tokens=90))
    results = _run(engine)
    rows = _waiting(results)
    codes = {code for _, _, _, code, _, _ in rows}
    assert KV_CACHE in codes and BEHIND in codes
    head = next(row for row in rows if row[3] == KV_CACHE and row[2] is S.WAITING)
    assert "more KV block" in head[4] and "free" in head[4]
    behind = next(row for row in rows if row[3] == BEHIND)
    assert behind[5] is not None and behind[5] != behind[1] and behind[5] in behind[4]
    preempted = [row for row in rows if row[2] is S.PREEMPTED]
    assert preempted and all(row[3] in (KV_CACHE, BEHIND) for row in preempted)
    # KV blocks held: up to 3 of the 4 usable ones (180 + 90 tokens in 128-token blocks).
    peak = max(
        e.kv_blocks for r in results if r.scheduled for e in r.scheduled.values()
    )  # fmt: skip
    assert 2 <= peak <= 4
