"""Recorded runs of the driver on the fake engine, deterministic through a manual clock."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stepview.engine.driver.loop import Driver
from stepview.files.results_file import ResultsWriter
from stepview.insight.run import RunInsight
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.model.sink import SnapshotSink
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.testing.fake_engine import FakeEngine, ManualClock
from stepview.trace.encoder import TraceEncoder
from stepview.trace.format import dump_line, trace_header
from stepview.trace.recorder import HeaderFields, TraceRecorder
from tests.helpers import all_done, wait_for


def add(driver: Driver, rid: str, prompt: str = "hello there", **spec: object) -> None:
    driver.send(AddRequest(rid, prompt, SamplingSpec(**spec)))  # type: ignore[arg-type]


def record(
    directory: Path,
    script: Callable[[Driver], None],
    engine: FakeEngine | None = None,
    *,
    extra_sinks: Sequence[SnapshotSink] = (),
    header_fields: HeaderFields | None = None,
) -> tuple[Driver, Path, Path]:
    """Run ``script`` against a driver that records a trace and a results file; stop it.

    The results carry the run insight's timelines, as a real run's do.
    """
    trace_path = directory / "run.trace.jsonl"
    results_path = directory / "results.jsonl"
    fake = engine or FakeEngine()
    insight = RunInsight()
    driver = Driver(
        lambda phase: fake,
        clock=ManualClock(tick=0.001),
        history_size=1_000_000,
        sinks=[
            TraceRecorder(trace_path, header_fields or {"model": "fake-model"}),
            ResultsWriter(results_path, annotate=insight.request_fields),
            *extra_sinks,
        ],
        insight=insight,
    )
    driver.start()
    try:
        script(driver)
    finally:
        driver.stop()
    assert not driver.alive
    return driver, trace_path, results_path


def run_to_end(driver: Driver, count: int) -> None:
    wait_for(driver, lambda s: len(s.finished) == count and all_done(s))


def write_trace(
    path: Path, snapshots: Sequence[StepSnapshot], fields: Mapping[str, Any] | None = None
) -> None:
    """A trace of hand-made snapshots, written as the recorder would (``fields``: the
    header's, as a recorder's caller gives them)."""
    encoder = TraceEncoder(snapshots[0].info)
    with path.open("w", encoding="utf-8") as out:
        out.write(dump_line(trace_header(fields or {}, snapshots[0].info)))
        for snapshot in snapshots:
            out.writelines(dump_line(line) for line in encoder.encode(snapshot))


def paced_snapshots(count: int, seconds_apart: float = 1.0) -> list[StepSnapshot]:
    """``count`` empty snapshots, one per step, ``seconds_apart`` on the recorded clock."""
    return [
        StepSnapshot(step=i, clock=i * seconds_apart, engine_state=EngineState.RUNNING)
        for i in range(count)
    ]
