"""``--record-rotate``: a long trace goes on in parts, each one replaying on its own.

A run on the fake engine is recorded with a small rotation size; every part must replay
exactly the live snapshots it covers (the finished requests from its start on), name the
parts before it, and together the parts must hold every snapshot once.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from stepview.engine.driver.loop import Driver
from stepview.model.recent import since, total_of
from stepview.model.snapshot import StepSnapshot
from stepview.testing.fake_engine import FakeEngine, ManualClock
from stepview.trace.linefile import part_path
from stepview.trace.reader import load_trace
from stepview.trace.recorder import TraceRecorder
from tests.trace.compare import assert_same_run
from tests.trace.runs import add, run_to_end

ROTATE = 1 << 16
REQUESTS = 60


def rotated_run(folder: Path, keep: int | None = None) -> tuple[list[StepSnapshot], TraceRecorder]:
    """Requests enough for several parts; every live snapshot and the recorder."""
    recorder = TraceRecorder(folder / "run.jsonl", {"model": "fake"}, rotate=ROTATE, keep=keep)
    engine = FakeEngine(max_num_seqs=4, num_kv_blocks=24, block_size=4)
    driver = Driver(
        lambda phase: engine,
        clock=ManualClock(tick=0.001),
        history_size=1_000_000,
        sinks=[recorder],
    )
    driver.start()
    try:
        for i in range(REQUESTS):
            add(driver, f"r{i}", "a prompt of a few words " * 3, max_tokens=30 + i % 7, seed=i)
        run_to_end(driver, REQUESTS)
    finally:
        driver.stop()
    return list(driver.history()), recorder


def live_part(live: list[StepSnapshot], first: StepSnapshot, count: int) -> list[StepSnapshot]:
    """The live snapshots a part covers, as it holds them: finished from its start on."""
    start = next(i for i, s in enumerate(live) if (s.step, s.clock) == (first.step, first.clock))
    # The part's first snapshot is cut from the snapshot before it in the live run.
    base = total_of(live[start - 1].finished) if start else 0
    return [replace(s, finished=list(since(s.finished, base))) for s in live[start : start + count]]


def test_every_part_replays_on_its_own_and_names_the_ones_before(tmp_path: Path) -> None:
    live, recorder = rotated_run(tmp_path)
    parts = recorder.parts
    assert len(parts) >= 3, parts
    assert parts == [str(part_path(tmp_path / "run.jsonl", n)) for n in range(1, len(parts) + 1)]
    assert parts[1].endswith("run.2.jsonl")
    replayed = 0
    for number, path in enumerate(parts, start=1):
        trace = load_trace(path)
        assert trace.warning is None
        assert trace.header["model"] == "fake"
        if number > 1:
            assert trace.header["part"] == number
            assert trace.header["previous"] == [Path(p).name for p in parts[: number - 1]]
        else:
            assert "part" not in trace.header
        snapshots = list(trace.snapshots)
        assert_same_run(live_part(live, snapshots[0], len(snapshots)), snapshots)
        replayed += len(snapshots)
        if number < len(parts):
            assert Path(path).stat().st_size >= ROTATE  # rotated once it held the size
    assert replayed == len(live)  # every snapshot once, in one part or another


def test_keep_removes_the_oldest_parts(tmp_path: Path) -> None:
    _, recorder = rotated_run(tmp_path, keep=2)
    parts = recorder.parts
    assert len(parts) >= 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(Path(p).name for p in parts[-2:])
    newest = load_trace(parts[-1])
    assert newest.header["previous"] == [Path(parts[-2]).name]  # only the parts still there
