"""The driver on real vLLM with settings that make its scheduling visible in the snapshots.

Four running at most: some wait while others run, and run later in the order they came; a
tiny KV cache: requests are preempted, visibly, and still produce every token; a 64-token
budget: prefill progress grows one chunk per step. Each test builds and stops its own
driver (see driver_checks), and every run passes
:func:`~tests.engine.own.driver_checks.check_run`.
"""

from __future__ import annotations

import pytest

from stepview.model.commands import Pause, Resume
from stepview.model.snapshot import RequestState
from tests.engine.own.driver_checks import (  # noqa: F401  (_no_pool_engine: the fixture)
    LONG_PROMPT,
    _add,
    _final,
    _no_pool_engine,
    _running,
    _wait_done,
    check_run,
)
from tests.helpers import TINY_KV_BYTES

pytestmark = pytest.mark.engine

S = RequestState


# -- scheduling made visible: continuous batching, preemption, chunked prefill -----------------


def test_continuous_batching_some_wait_while_others_run() -> None:
    ids = [f"b{i}" for i in range(8)]
    with _running(max_num_seqs=4) as driver:
        driver.send(Pause())  # all eight join the engine together
        for i, rid in enumerate(ids):
            _add(driver, rid, f"def f{i}(x): return x", temperature=0, max_tokens=12)
        driver.send(Resume())
        final = _final(_wait_done(driver, ids))
        history = driver.history()
    assert all(final[rid].state is S.FINISHED for rid in ids)
    paths = check_run(history)
    mixed = [
        s for s in history if s.pane("running") and any(v.state is S.WAITING for v in s.active)
    ]
    assert mixed, "no snapshot showed requests waiting while others ran"
    assert all(len(s.pane("running")) <= 4 for s in history)
    assert max(s.counters.waiting for s in history) == 4
    # The four that waited did run later, in the order they came.
    waited = [rid for rid in ids if S.WAITING in paths[rid]]
    assert waited == ids[4:]
    for rid in waited:
        assert paths[rid].index(S.WAITING) < paths[rid].index(S.DECODING)


def test_tiny_kv_cache_preemption_shows_in_the_snapshots() -> None:
    ids = [f"p{i}" for i in range(4)]
    prompt = "def foo(x): return x + " * 20  # ~180 tokens: two of them fill the cache
    with _running(kv_cache_memory_bytes=TINY_KV_BYTES) as driver:
        for rid in ids:
            _add(driver, rid, prompt, temperature=0, max_tokens=160)
        final = _final(_wait_done(driver, ids))
        history = driver.history()
    paths = check_run(history)  # includes: going back only through a recorded preemption
    preempted = [rid for rid in ids if S.PREEMPTED in paths[rid]]
    assert preempted, "no request was preempted"
    total = sum(final[rid].num_preemptions for rid in ids)
    assert total >= len(preempted)
    # vLLM's per-step preemption counts add up to what the requests carry.
    steps = {s.step: s.counters.preemptions for s in history}
    assert sum(steps.values()) == total
    # The snapshot where it happened: state PREEMPTED, prefill progress back to 0.
    for rid in preempted:
        first = next(v for s in history if (v := s.find(rid)) and v.state is S.PREEMPTED)
        assert first.computed_prompt_tokens == 0 and first.num_preemptions == 1
    # Preemption costs time, never tokens.
    assert all(final[rid].state is S.FINISHED and final[rid].output_tokens == 160 for rid in ids)


def test_chunked_prefill_shows_growing_progress() -> None:
    chunk = 64
    with _running(max_num_batched_tokens=chunk) as driver:
        _add(driver, "long", LONG_PROMPT, temperature=0, max_tokens=3)
        final = _final(_wait_done(driver, ["long"]))
        history = driver.history()
    check_run(history)
    prefilling = [
        v for s in history if (v := s.find("long")) is not None and v.state is S.PREFILLING
    ]
    total = final["long"].prompt_tokens
    assert total > 4 * chunk
    # One snapshot per step, one chunk per step: 64, 128, 192, ...
    progress = [v.computed_prompt_tokens for v in prefilling]
    assert progress == [chunk * (i + 1) for i in range(len(progress))]
    assert len(progress) == (total - 1) // chunk  # the last chunk also yields the first token
    assert all(v.output_tokens == 0 and v.prompt_tokens == total for v in prefilling)
    assert final["long"].output_tokens == 3
