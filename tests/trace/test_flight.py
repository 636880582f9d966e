"""The flight recorder: a ring of the last DURATION of steps, written as a trace when it matters.

The snapshots come from a real driver run on the fake engine (a queue long enough for the
stuck watchdog to fire), fed to the recorder in order on the test's thread, so every check
is deterministic: what each recording holds is compared with the live snapshots it covers.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stepview.engine.driver.loop import Driver
from stepview.insight.alerts import Thresholds
from stepview.insight.run import RunInsight
from stepview.model.alerts import STUCK
from stepview.model.flight import ON_SIGNAL, FlightDump
from stepview.model.recent import since, total_of
from stepview.model.snapshot import StepSnapshot
from stepview.testing.fake_engine import FakeEngine, ManualClock
from stepview.trace.flight import SEGMENTS, FlightRecorder
from stepview.trace.reader import load_trace
from stepview.trace.replay import ReplaySource
from tests.helpers import wait_for
from tests.trace.compare import assert_same_run
from tests.trace.runs import add, run_to_end

DURATION = 0.2  # seconds of the run's (manual) clock
NOW = datetime(2026, 12, 1, 23, 15, 4, tzinfo=UTC).timestamp()  # when recordings are written
STAMP = "20261201T231504Z"
REQUESTS = 40


@pytest.fixture(scope="module")
def live() -> list[StepSnapshot]:
    """Every snapshot of a run whose queue waits past the stuck limit, again and again."""
    engine = FakeEngine(max_num_seqs=2)
    driver = Driver(
        lambda phase: engine,
        clock=ManualClock(tick=0.0005),
        history_size=1_000_000,
        insight=RunInsight(Thresholds(stuck_after=0.3)),
    )
    driver.start()
    try:
        for i in range(REQUESTS):
            add(driver, f"r{i}", "a prompt of a few words", max_tokens=20, seed=i)
        run_to_end(driver, REQUESTS)
    finally:
        driver.stop()
    return list(driver.history())


def fed(recorder: FlightRecorder, snapshots: list[StepSnapshot]) -> FlightRecorder:
    for snapshot in snapshots:
        recorder.on_snapshot(snapshot, ())
    recorder.close()
    return recorder


def covered(live: list[StepSnapshot], first: StepSnapshot, count: int) -> list[StepSnapshot]:
    """The live snapshots a recording holds, as it holds them: finished from its start on."""
    start = next(i for i, s in enumerate(live) if (s.step, s.clock) == (first.step, first.clock))
    base = total_of(live[start - 1].finished) if start else 0
    return [replace(s, finished=list(since(s.finished, base))) for s in live[start : start + count]]


def raised(live: list[StepSnapshot]) -> list[tuple[int, float]]:
    """(step, clock) of every alert the run raised, in order."""
    seen: set[tuple[str, str | None]] = set()
    out = []
    for snapshot in live:
        for alert in snapshot.alerts:
            if alert.key not in seen:
                out.append((alert.step, snapshot.clock))
        seen = {alert.key for alert in snapshot.alerts}
    return out


# Alerts come every ~50 ms: within 0.2 s they extend one recording; 0.02 s apart, each
# one writes a recording of its own.
@pytest.mark.parametrize("duration", [DURATION, DURATION / 10], ids=["extended", "separate"])
def test_alerts_write_recordings_that_replay_the_window_before_and_after(
    live: list[StepSnapshot], tmp_path: Path, duration: float
) -> None:
    alerts = raised(live)
    assert len(alerts) >= 2 and all(a.kind == STUCK for s in live for a in s.alerts)
    dumps: list[FlightDump] = []
    made = FlightRecorder(
        tmp_path, duration, 1 << 30, {"model": "fake"}, on_dump=dumps.append, now=lambda: NOW
    )
    recorder = fed(made, live)
    files = sorted(tmp_path.iterdir())
    assert len(files) == recorder.written
    assert (len(files) == 1) if duration == DURATION else (len(files) > 2)
    triggers: list[int] = []
    for path in files:
        trace = load_trace(path)
        flight = trace.header["flight"]
        assert trace.header["model"] == "fake"
        assert flight["kind"] == STUCK and flight["step"] in {step for step, _ in alerts}
        assert path.name == f"flight-{STAMP}-stuck-step{flight['step']}.jsonl"
        snapshots = list(trace.snapshots)
        assert_same_run(covered(live, snapshots[0], len(snapshots)), snapshots)
        at = next(s for s in snapshots if s.step == flight["step"])
        # The ring held the duration before the alert (at most an eighth more) ...
        assert duration <= at.clock - snapshots[0].clock <= duration * (1 + 1 / SEGMENTS) + 0.01
        assert flight["held"] == pytest.approx(at.clock - snapshots[0].clock, abs=1e-3)
        # ... and the recording went on for duration after the last trigger in it.
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        later = [line["step"] for line in lines if line.get("k") == "flight"]
        triggers += [flight["step"], *later]
        assert snapshots[-1].clock >= max(c for s, c in alerts if s in [flight["step"], *later])
    # Every alert started a recording or extended the one being written: none was lost.
    assert sorted(triggers) == [step for step, _ in alerts]
    assert [d.open for d in dumps].count(False) == len(files)  # each one closed at last


def test_the_ring_stays_within_its_bytes_and_says_when_it_held_less(
    live: list[StepSnapshot], tmp_path: Path
) -> None:
    bound = 1 << 16
    recorder = FlightRecorder(tmp_path, 3600.0, bound)
    most = 0
    for snapshot in live:
        if not snapshot.alerts:  # no recordings here: the ring alone
            recorder.on_snapshot(replace(snapshot, alerts=()), ())
            most = max(most, recorder.held[1])
    assert bound / 2 < most <= bound + bound // SEGMENTS
    recorder.request(ON_SIGNAL, "asked for with SIGUSR1")
    recorder.close()
    (path,) = tmp_path.iterdir()
    flight = load_trace(path).header["flight"]
    assert flight["kind"] == ON_SIGNAL and "--flight-max-mb" in flight["short"]


def test_a_request_from_another_thread_writes_what_the_ring_holds(
    live: list[StepSnapshot], tmp_path: Path
) -> None:
    quiet = [replace(s, alerts=()) for s in live[: len(live) // 2]]
    recorder = FlightRecorder(tmp_path, DURATION, 1 << 30)
    for snapshot in quiet:
        recorder.on_snapshot(snapshot, ())
    asker = threading.Thread(target=recorder.request, args=(ON_SIGNAL, "asked for with SIGUSR1"))
    asker.start()
    asker.join()
    assert recorder.last is not None and recorder.last.open
    assert recorder.last.step == quiet[-1].step
    recorder.close()
    assert recorder.last is not None and not recorder.last.open
    trace = load_trace(recorder.last.path)
    assert trace.header["flight"]["why"] == "asked for with SIGUSR1"
    assert list(trace.snapshots)[-1].step == quiet[-1].step


def test_a_replay_opens_paused_at_the_step_and_says_why(
    live: list[StepSnapshot], tmp_path: Path
) -> None:
    recorder = fed(FlightRecorder(tmp_path, DURATION, 1 << 30), live)
    assert recorder.last is not None
    step = recorder.last.step
    source = ReplaySource(recorder.last.path)
    source.start()
    try:
        wait_for(source, lambda s: s.step == step and source.status.loaded)
        status = source.status
        assert not status.playing
        assert status.note is not None and status.note.startswith("Flight recording: ")
        assert f"opens at step {recorder.last.step}" in status.note
    finally:
        source.stop()
