"""A flight recording carries the engine cores' thread stacks, taken off the thread that asked.

The recorder is fed the committed replay's snapshots (as the driver would hand them over) and
given a probe that stands for the engine core: it answers with a real faulthandler dump, or
with why it cannot, or fails. Each test waits for the recorder to say the stacks are in
(``on_dump`` with ``stacks`` set), then reads the recording back as a replay would.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from stepview.model.alerts import STUCK
from stepview.model.flight import ON_SIGNAL, FlightDump
from stepview.model.snapshot import StepSnapshot
from stepview.model.stacks import ASKED, NONE, CoreStacks, RecordedStacks
from stepview.trace.flight import FlightRecorder
from stepview.trace.reader import load_trace
from tests.model.test_stacks import real_dump
from tests.ui.replay_trace import recorded_run

WHY_STOPPED = "the engine core process 7 (VLLM::EngineCore) is stopped"


class Probe:
    """An engine core as the recorder sees it: ``answer`` is what it gives, once released."""

    def __init__(self, answer: list[CoreStacks] | Exception) -> None:
        self.answer = answer
        self.release = threading.Event()
        self.asked: list[float] = []

    def take(self, since: float) -> Sequence[CoreStacks]:
        self.asked.append(since)
        self.release.wait(10)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class Told:
    """The recorder's ``on_dump``: every dump, and an event once stacks were added."""

    def __init__(self) -> None:
        self.dumps: list[FlightDump] = []
        self.stacks = threading.Event()

    def __call__(self, dump: FlightDump) -> None:
        self.dumps.append(dump)
        if dump.stacks is not None:
            self.stacks.set()


def asked_stacks() -> CoreStacks:
    text, parked = real_dump()
    return CoreStacks("7 (VLLM::EngineCore)", 1.0, ASKED, text, step_thread=parked)


def recorder_for(tmp_path: Path, probe: Probe, told: Told, duration: float) -> FlightRecorder:
    recorder = FlightRecorder(tmp_path, duration, 1 << 30, {"model": "fake"}, on_dump=told)
    recorder.stacks = probe
    return recorder


def one_recording(tmp_path: Path) -> Path:
    (path,) = tmp_path.glob("flight-*.jsonl")
    return path


@pytest.fixture(scope="module")
def run() -> list[StepSnapshot]:
    return recorded_run()


def test_stacks_join_the_recording_being_written_after_the_steps_meanwhile(
    tmp_path: Path, run: list[StepSnapshot]
) -> None:
    probe, told = Probe([asked_stacks()]), Told()
    recorder = recorder_for(tmp_path, probe, told, duration=3600.0)
    half = len(run) // 2
    for snapshot in run[:half]:
        recorder.on_snapshot(snapshot, ())
    recorder.request(ON_SIGNAL, "asked for with SIGUSR1")
    recorder.request(ON_SIGNAL, "again, while the stacks are being taken")  # one take covers it
    for snapshot in run[half:]:  # the driver goes on while the core is asked
        recorder.on_snapshot(snapshot, ())
    probe.release.set()
    assert told.stacks.wait(10)
    recorder.close()
    assert len(probe.asked) == 1
    trace = load_trace(one_recording(tmp_path))
    snapshots = trace.snapshots
    assert snapshots[len(snapshots) - 1].step == run[-1].step  # the steps after the ask too
    (taken,) = trace.stacks
    assert taken == RecordedStacks(ON_SIGNAL, run[half - 1].step, tuple(probe.answer))  # type: ignore[arg-type]
    frame = taken.cores[0].step_frame()
    assert frame is not None and frame.function == "wait"
    (summary,) = [dump.stacks for dump in told.dumps if dump.stacks is not None]
    assert (
        summary == f"engine core stacks of 7 (VLLM::EngineCore): its step thread in {frame.where}"
    )


def test_a_recording_complete_before_the_answer_still_gets_it_and_why_there_are_none(
    tmp_path: Path, run: list[StepSnapshot]
) -> None:
    stopped = CoreStacks("7 (VLLM::EngineCore)", 2.0, NONE, why_none=WHY_STOPPED)
    probe, told = Probe([stopped]), Told()
    recorder = recorder_for(tmp_path, probe, told, duration=0.001)  # over at the next step
    for snapshot in run[:10]:
        recorder.on_snapshot(snapshot, ())
    recorder.request(STUCK, "r1 stuck: waiting for 60 s")
    for snapshot in run[10:]:
        recorder.on_snapshot(snapshot, ())
    assert recorder.last is not None and not recorder.last.open
    probe.release.set()
    assert told.stacks.wait(10)
    recorder.close()
    (taken,) = load_trace(one_recording(tmp_path)).stacks
    assert taken.kind == STUCK and taken.cores == (stopped,)
    assert told.dumps[-1].stacks == f"no engine core stacks of 7 (VLLM::EngineCore): {WHY_STOPPED}"


def test_a_probe_that_fails_leaves_a_recording_that_says_so(
    tmp_path: Path, run: list[StepSnapshot]
) -> None:
    probe, told = Probe(RuntimeError("psutil exploded")), Told()
    probe.release.set()
    recorder = recorder_for(tmp_path, probe, told, duration=3600.0)
    for snapshot in run:
        recorder.on_snapshot(snapshot, ())
    recorder.request(ON_SIGNAL, "asked for with SIGUSR1")
    assert told.stacks.wait(10)
    recorder.close()
    trace = load_trace(one_recording(tmp_path))
    assert trace.warning is None
    (core,) = trace.stacks[0].cores
    assert core.how == NONE and "psutil exploded" in (core.why_none or "")
