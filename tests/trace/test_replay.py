"""Playback of a recorded trace: pace, speed, pause, stepping, seeking, and the replay thread."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from stepview.engine.driver.loop import Driver
from stepview.model.commands import Abort, AddRequest, Pause, Resume, SingleStep
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import ArrivalCount, EngineInfo, EngineState, RankStatus, StepSnapshot
from stepview.trace.format import dump_line, trace_header
from stepview.trace.playback import Seek, SeekEnd, SeekStart, SetSpeed, StepBack, StepForward
from stepview.trace.reader import TraceReader, load_trace
from stepview.trace.replay import Playback, ReplaySource
from stepview.trace.store import Trace, TraceSnapshots
from tests.helpers import wait_for
from tests.trace.compare import assert_same_run
from tests.trace.runs import add, paced_snapshots, record, run_to_end, write_trace


@pytest.fixture
def paced(tmp_path: Path) -> TraceSnapshots:
    """Ten snapshots, steps 0..9, one recorded second apart."""
    path = tmp_path / "paced.jsonl"
    write_trace(path, paced_snapshots(10))
    return load_trace(path).snapshots


def test_plays_at_the_recorded_pace(paced: TraceSnapshots) -> None:
    playback = Playback()
    playback.advance(paced, now=100.0, loaded=True)  # playback starts now
    assert playback.position == 0
    playback.advance(paced, now=102.5, loaded=True)
    assert playback.position == 2
    assert playback.due_in(paced, now=102.5) == pytest.approx(0.5)
    playback.advance(paced, now=109.0, loaded=True)
    assert playback.position == 9
    assert not playback.playing  # the end of a loaded trace stops playback
    assert playback.due_in(paced, now=109.0) is None


def test_speed_scales_the_pace_from_where_it_changed(paced: TraceSnapshots) -> None:
    playback = Playback(speed=2.0)
    playback.advance(paced, now=0.0, loaded=True)
    playback.advance(paced, now=1.0, loaded=True)
    assert playback.position == 2
    playback.handle(SetSpeed(0.5), paced, now=1.0, loaded=True)
    playback.advance(paced, now=2.9, loaded=True)
    assert playback.position == 2
    playback.advance(paced, now=3.0, loaded=True)
    assert playback.position == 3
    playback.handle(SetSpeed(-1.0), paced, now=3.0, loaded=True)  # ignored, not a crash
    assert playback.speed == 0.5
    with pytest.raises(ValueError, match="positive"):
        playback.set_speed(0.0, paced, now=3.0)


def test_pause_holds_and_resume_continues_from_there(paced: TraceSnapshots) -> None:
    playback = Playback()
    playback.advance(paced, now=0.0, loaded=True)
    playback.advance(paced, now=3.0, loaded=True)
    playback.handle(Pause(), paced, now=3.0, loaded=True)
    playback.advance(paced, now=60.0, loaded=True)
    assert playback.position == 3 and not playback.playing
    playback.handle(Resume(), paced, now=60.0, loaded=True)
    playback.advance(paced, now=61.0, loaded=True)
    assert playback.position == 4


def test_stepping_pauses_and_stays_in_bounds(paced: TraceSnapshots) -> None:
    playback = Playback()
    playback.handle(StepForward(), paced, now=0.0, loaded=True)
    assert playback.position == 1 and not playback.playing
    playback.handle(SingleStep(), paced, now=0.0, loaded=True)  # the live "step" key
    playback.handle(StepForward(3), paced, now=0.0, loaded=True)
    assert playback.position == 5
    playback.handle(StepBack(), paced, now=0.0, loaded=True)
    assert playback.position == 4
    playback.handle(StepBack(50), paced, now=0.0, loaded=True)
    assert playback.position == 0
    playback.handle(StepForward(50), paced, now=0.0, loaded=True)
    assert playback.position == 9


def test_seeking(paced: TraceSnapshots) -> None:
    playback = Playback()
    playback.handle(Seek(6), paced, now=0.0, loaded=True)
    assert playback.position == 6 and playback.playing  # seeking keeps playing
    playback.advance(paced, now=1.0, loaded=True)
    assert playback.position == 7
    playback.handle(SeekStart(), paced, now=1.0, loaded=True)
    assert playback.position == 0
    playback.handle(SeekEnd(), paced, now=1.0, loaded=True)
    assert playback.position == 9
    playback.handle(Seek(500), paced, now=1.0, loaded=True)
    assert playback.position == 9
    playback.handle(Pause(), paced, now=1.0, loaded=True)
    playback.handle(Resume(), paced, now=1.0, loaded=True)  # at the end: play again
    assert playback.position == 0 and playback.playing


def test_seek_lands_on_the_snapshot_published_after_the_step(tmp_path: Path) -> None:
    """Snapshots published between steps (commands, idle) share a step number."""
    snapshots = [
        StepSnapshot(s, float(i), EngineState.RUNNING) for i, s in enumerate([0, 0, 1, 1, 1, 4])
    ]
    path = tmp_path / "steps.jsonl"
    write_trace(path, snapshots)
    loaded = load_trace(path).snapshots
    playback = Playback(playing=False)
    for step, index in [(0, 0), (1, 2), (2, 5), (4, 5), (-3, 0)]:
        playback.handle(Seek(step), loaded, now=0.0, loaded=True)
        assert playback.position == index, step


def _recorded_trace(tmp_path: Path) -> tuple[Driver, Trace]:
    def run(driver: Driver) -> None:
        for i in range(4):
            add(driver, f"r{i}", "hello " * (i + 1), max_tokens=10 + 3 * i, logprobs=1)
        run_to_end(driver, 4)

    driver, path, _ = record(tmp_path, run)
    return driver, load_trace(path)


def test_replay_source_plays_the_whole_run(tmp_path: Path) -> None:
    driver, trace = _recorded_trace(tmp_path)
    source = ReplaySource(trace, speed=50.0)  # the manual clock recorded ~1 ms per read
    assert source.accepts_requests is False
    source.start()
    try:
        seen: list[StepSnapshot] = []
        deadline = time.monotonic() + 20
        while not source.status.at_end and time.monotonic() < deadline:
            latest = source.latest()
            if not seen or latest is not seen[-1]:
                seen.append(latest)
            time.sleep(0.0005)  # a poller's pace, as the UI's timer: it may miss snapshots
        assert source.status.at_end and not source.status.playing
        final = source.latest()
        assert_same_run(driver.history()[-1:], [final])
        assert len(source.history()) == len(driver.history())
        # Shown in order (a slow poller may miss some, never sees them out of order).
        assert [s.clock for s in seen[1:]] == sorted(s.clock for s in seen[1:])
    finally:
        source.stop()


def test_replay_source_controls(tmp_path: Path) -> None:
    driver, trace = _recorded_trace(tmp_path)
    live = driver.history()
    source = ReplaySource(trace, start_paused=True)
    source.start()
    try:
        first = wait_for(source, lambda s: s.clock == live[0].clock)  # recorded start-up
        assert_same_run(live[:1], [first])
        assert not source.status.playing
        target = live[len(live) // 2].step
        source.send(Seek(target))
        shown = wait_for(source, lambda s: s.step == target)
        assert_same_run([next(s for s in live if s.step == target)], [shown])
        source.send(StepForward())
        wait_for(source, lambda s: s.clock > shown.clock)
        source.send(StepBack(2))
        back = wait_for(source, lambda s: s.clock < shown.clock)
        assert source.status.position == live.index(next(s for s in live if s.clock == back.clock))
        source.send(AddRequest("x", "no", SamplingSpec()))  # a replay takes no requests
        source.send(Abort("r0"))
        source.send(SeekEnd())
        end = wait_for(source, lambda s: s.engine_state is EngineState.STOPPED)
        assert end.clock == live[-1].clock and source.status.at_end
        source.send(SeekStart())
        wait_for(source, lambda s: s.clock == live[0].clock)
        source.set_speed(1000.0)
        source.send(Resume())
        wait_for(source, lambda s: s.clock == live[-1].clock)
        with pytest.raises(ValueError):
            source.set_speed(float("nan"))
    finally:
        source.stop()
    assert not source.alive


def test_replay_source_reads_a_big_trace_while_playing_and_stops_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.jsonl"
    write_trace(path, paced_snapshots(60_000, seconds_apart=0.001))
    # A disk that stalls: the file is read in 600 chunks of 100 lines, and the tenth waits until
    # the test lets it go, so "playing, not loaded yet" is a state the test holds, not a race
    # with the parser; and the chunks read tell whether stop() waited for the rest of the file.
    monkeypatch.setattr("stepview.trace.replay.LOAD_CHUNK", 100)
    read = TraceReader.read
    stalled, go_on = threading.Event(), threading.Event()
    chunks = 0

    def slow_read(self: TraceReader, max_lines: int | None = None) -> bool:
        nonlocal chunks
        chunks += 1
        if chunks == 10:
            stalled.set()
            go_on.wait(60)
        return read(self, max_lines)

    monkeypatch.setattr(TraceReader, "read", slow_read)
    source = ReplaySource(path, speed=1.0)
    source.start()
    try:
        assert stalled.wait(30), "the tenth chunk was never read"
        wait_for(source, lambda s: s.engine_state is EngineState.RUNNING, timeout=10)
        # Playback started before the whole file was read; stop() comes in the middle of it.
        # One status object: its count and loaded flag were published together.
        status = source.status
        assert not status.loaded
        assert 0 < status.count < 60_000
        stopper = threading.Thread(target=source.stop, kwargs={"timeout": 60})
        stopper.start()
        # The stalled chunk goes on only once stop() has asked the thread to end, so whether
        # another chunk is read after it says whether stopping waits for the rest of the file.
        assert source._stopping.wait(30)
        go_on.set()
        stopper.join(60)  # a failsafe: stop() returns when the replay thread has ended
        assert not stopper.is_alive() and not source.alive
        assert chunks == 10  # the chunk under way when stop() came, and not one after it
    finally:
        go_on.set()
        source.stop()
    assert not source.alive


def test_replay_imports_neither_vllm_nor_torch() -> None:
    """Every module of the trace package and the replay launcher."""
    code = (
        "import importlib, pkgutil, sys, stepview.trace\n"
        "import stepview.launch.replay\n"
        "for info in pkgutil.walk_packages(stepview.trace.__path__, 'stepview.trace.'):\n"
        "    importlib.import_module(info.name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'vllm', 'torch', 'transformers', 'textual'} or m.startswith('stepview.ui'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_loading_and_empty_trace_snapshots_describe_the_traces_engine(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    info = EngineInfo(model="tiny", max_num_seqs=3)
    path.write_text(dump_line(trace_header({}, info)))
    source = ReplaySource(path)
    loading = source.latest()
    assert (loading.engine_state, loading.info) == (EngineState.STARTING, info)
    assert loading.phase == f"loading trace {path}"
    source.start()
    try:
        empty = wait_for(source, lambda s: s.engine_state is EngineState.STOPPED)
    finally:
        source.stop()
    assert empty == replace(loading, engine_state=EngineState.STOPPED, phase=empty.phase)
    assert empty.phase == "the trace holds no steps"


def test_a_failed_replay_keeps_what_it_showed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every field of the snapshot on screen stays (its requests, ranks, arrivals...), as a
    live engine's failure keeps its requests; only the state and the phase line say why."""
    path = tmp_path / "t.jsonl"
    shown = replace(
        paced_snapshots(1)[0], ranks=(RankStatus(0, True, 1),), arrivals=ArrivalCount(1, 2)
    )
    write_trace(path, [shown])

    def broken(self: ReplaySource, wait: float) -> None:
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(ReplaySource, "_drain", broken)
    source = ReplaySource(path)
    source.start()
    source.join(5.0)
    failed = source.latest()
    assert source.error == failed.phase == "replay failed: RuntimeError: the disk went away"
    assert failed == replace(shown, engine_state=EngineState.ERROR, phase=failed.phase)
