"""``engine_overhead --smoke``: every variant's plumbing on stepview's fake engine, no vLLM.

The smoke test of ``engine_overhead`` checks that every variant runs and that the report
prints each of its lines, never a figure. On vLLM each variant is an engine start-up in a
process of its own (five, 250 s of the test on this loaded 2-core machine); here the same
children, the same driver, recorder and results file, and the real ``stepview`` TUI in tmux
(its run stats handed over as it stops) run on :class:`~stepview.testing.fake_engine.FakeEngine`:
vLLM's ``Engine`` protocol and output shapes, its scheduling in miniature, its records read by
the same code. What only vLLM runs (the bare variants' ``LLMEngine`` loop, the engine core in
a process of its own) the ``core_cpu`` smoke test runs on real vLLM with the same calls, and
``--quick`` and the full run are unchanged.

``python -m benchmarks.fake_engine_runs STEPVIEW-ARGS...`` is the tui variant's command: the
real ``stepview.cli.main()``, the fake engine built where vLLM's would be, its start-up
lasting until the benchmark has seen the loading view (the first frame it times), which a
fake built at once could replace before a poll of the screen saw it.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.overhead_measurement import Measurement, bare_loop
from benchmarks.workload import CHILD_TIMEOUT_S, POLL_S
from stepview.engine.driver.loop import Driver, PhaseCallback
from stepview.engine.own import live
from stepview.model.commands import AddRequest
from stepview.testing.fake_engine import FakeEngine

FIRST_FRAME_ENV = "STEPVIEW_BENCH_FIRST_FRAME"
"""The tui variant: the file the benchmark writes once it has seen the first frame, which the
fake's start-up waits for."""
LIVE_HISTORY = inspect.signature(live.live_driver).parameters["history_size"].default
"""The history ``live_driver`` keeps unless told (more than a bare driver's)."""


def fake_engine() -> FakeEngine:
    """Room for the workload: prompts of up to ~300 tokens (bytes, here), 16 at once."""
    return FakeEngine(max_num_seqs=16, max_num_batched_tokens=2048, num_kv_blocks=1024)


def bare(requests: list[AddRequest], name: str) -> Measurement:
    """The bare variants' loop on the fake engine."""
    engine = fake_engine()
    for request in requests:
        engine.add_request(request.request_id, request.prompt, request.spec)
    measurement = bare_loop(
        name,
        engine.has_unfinished,
        engine.step,
        lambda result: ((o.request_id, c) for o in result.outputs for c in o.completions),
    )
    engine.shutdown()
    return measurement


def fake_live_driver(
    engine_argv: list[str], log_path: Path, *, holder: object, **settings: Any
) -> Driver:
    """:func:`~stepview.engine.own.live.live_driver` on the fake engine, its settings passed
    to the driver as that passes them (its default history too); in the tui variant its
    start-up waits for the benchmark to have seen the first frame."""
    seen = os.environ.get(FIRST_FRAME_ENV)

    def factory(phase: PhaseCallback) -> FakeEngine:
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        while seen is not None and not Path(seen).exists() and time.monotonic() < deadline:
            time.sleep(POLL_S)
        return fake_engine()

    settings.pop("processes", None)  # the engine's processes: the fake has none
    settings.setdefault("history_size", LIVE_HISTORY)
    return Driver(factory, **settings)


def run_stepview(argv: Sequence[str]) -> int:
    """The tui variant's command: ``stepview ARGV`` as the console script runs it, with
    :func:`fake_live_driver` where ``live_driver`` is looked up."""
    from stepview.cli import main as stepview_main

    live.live_driver = fake_live_driver
    return stepview_main(argv)


if __name__ == "__main__":
    raise SystemExit(run_stepview(sys.argv[1:]))
