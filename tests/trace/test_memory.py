"""Memory of looking back: the driver's live history, and a whole replayed trace.

Both share every request view that did not change, so memory grows with what changed. The
figures asserted here are loose bounds around what was measured (see the numbers in the
assertion messages); they catch a change that starts copying per step.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from stepview.engine.driver.loop import Driver
from stepview.testing.fake_engine import FakeEngine
from stepview.trace.reader import load_trace
from tests.trace.runs import add, record, run_to_end


def _engine() -> FakeEngine:
    """Room for 64 concurrent requests of up to 4096 tokens."""
    return FakeEngine(
        max_num_seqs=64, max_num_batched_tokens=8192, num_kv_blocks=4096, max_model_len=4096
    )


@contextmanager
def _traced() -> Iterator[Callable[[], int]]:
    gc.collect()
    tracemalloc.start()
    try:
        yield lambda: (gc.collect(), tracemalloc.get_traced_memory()[0])[1]
    finally:
        tracemalloc.stop()


def _wide(driver: Driver) -> None:
    for i in range(64):
        add(driver, f"r{i}", f"Prompt {i}: tell me about engines", max_tokens=64, seed=i)
    run_to_end(driver, 64)


def _long(driver: Driver) -> None:
    for i in range(4):
        add(driver, f"long{i}", f"long {i}", max_tokens=1000, seed=i)
    run_to_end(driver, 4)


def _history_bytes_per_request_step(tmp_path: Path, script: Callable[[Driver], None]) -> float:
    """Bytes the driver's history holds per active request per snapshot (tracemalloc)."""
    with _traced() as traced:
        driver, _, _ = record(tmp_path, script, _engine())
        with_history = traced()
        history = driver.history()
        request_steps = sum(len(s.active) for s in history)
        del history
        driver._out._history.clear()
        return (with_history - traced()) / request_steps


def _replay_bytes_per_request_step(path: Path) -> float:
    with _traced() as traced:
        trace = load_trace(path)
        used = traced()
    return used / sum(len(row.active) for row in trace.store.rows)


def test_live_history_of_64_requests(tmp_path: Path) -> None:
    per = _history_bytes_per_request_step(tmp_path, _wide)
    assert per < 1_000, f"live history: {per:.0f} B per active request per snapshot"


def test_long_completions_do_not_copy_their_text_per_step(tmp_path: Path) -> None:
    """1000-token completions: neither the driver's history nor a whole replayed trace keeps a
    copy of the text so far per step (that was 3.2 KB per request per snapshot, and growing
    with the length); both keep the pieces each step appended."""
    live = _history_bytes_per_request_step(tmp_path, _long)
    replay = _replay_bytes_per_request_step(tmp_path / "run.trace.jsonl")
    assert live < 1_200, f"live history: {live:.0f} B per active request per snapshot"
    assert replay < 1_500, f"replay: {replay:.0f} B per active request per snapshot"
