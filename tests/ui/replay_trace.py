"""A small recorded run for the replay tests: deterministic, committed as ``tests/data``.

    .venv/bin/python -m tests.ui.replay_trace      # rewrites tests/data/replay.trace.jsonl

The driver runs on the fake engine with a manual clock, paused, and every command waits for
its effect before the next is sent, so the driver thread reads the clock the same number of
times on every run and the file comes out byte for byte the same. The snapshot tests read the
committed file rather than recording afresh, so they picture the replay UI, not the fake
engine: a change to the engine's scheduling does not move their pixels (rerun this module
when the trace format changes).
"""

from __future__ import annotations

import sys
from pathlib import Path

from stepview.engine.driver.loop import Driver
from stepview.model.commands import AddRequest, Resume, SingleStep
from stepview.model.prompts import SEED_PROMPTS
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.testing.fake_engine import FakeEngine, ManualClock
from stepview.trace.reader import load_trace
from stepview.trace.recorder import TraceRecorder
from tests.helpers import DATA, all_done, wait_for

TRACE = DATA / "replay.trace.jsonl"

# (request id, prompt, sampling) added in waves: some steps run between the waves.
FIRST_WAVE = [(f"r{i}", prompt, spec) for i, (prompt, spec) in enumerate(SEED_PROMPTS, 1)]
SECOND_WAVE = [
    ("r4", "Explain the KV cache to a new engineer.", SamplingSpec(max_tokens=40, seed=4)),
    ("r5", "List three prime numbers:", SamplingSpec(temperature=0.0, max_tokens=12)),
    ("r6", "Write a haiku about schedulers.", SamplingSpec(max_tokens=30, seed=6)),
]
STEPS_BETWEEN = 6


def record_trace(path: Path = TRACE) -> Path:
    """Record the run into ``path`` and return it."""
    engine = FakeEngine(max_num_seqs=4, num_kv_blocks=14, model="fake-engine")
    driver = Driver(
        lambda phase: engine,
        clock=ManualClock(tick=0.0005),
        start_paused=True,
        history_size=100_000,
        sinks=[TraceRecorder(path, {"model": "fake-engine", "created": "2025-01-01T00:00:00"})],
    )
    driver.start()
    try:
        wait_for(driver, lambda s: s.engine_state is EngineState.PAUSED)
        _add(driver, FIRST_WAVE)
        for _ in range(STEPS_BETWEEN):
            step = driver.latest().step
            driver.send(SingleStep())
            wait_for(driver, lambda s, step=step: s.step == step + 1)  # type: ignore[misc]
        _add(driver, SECOND_WAVE)
        driver.send(Resume())
        wait_for(driver, all_done)
    finally:
        driver.stop()
    return path


def recorded_run() -> list[StepSnapshot]:
    """Every snapshot of the committed trace (``tests/data/replay.trace.jsonl``)."""
    return list(load_trace(TRACE).snapshots)


def _add(driver: Driver, wave: list[tuple[str, str, SamplingSpec]]) -> None:
    for request_id, prompt, spec in wave:
        driver.send(AddRequest(request_id, prompt, spec))
        wait_for(driver, lambda s, rid=request_id: s.find(rid) is not None)  # type: ignore[misc]


if __name__ == "__main__":
    print(record_trace(Path(sys.argv[1]) if len(sys.argv) > 1 else TRACE))
