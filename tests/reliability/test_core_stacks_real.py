"""The engine core's stacks in a flight recording, on real vLLM: hung in a step, then stopped.

stepview runs headless with its engine core in its own process and a user's scheduler class
(:mod:`tests.engine.plugin.hanging_scheduler`) whose step hangs in native code. Once it hangs,
``SIGUSR1`` asks stepview for a flight recording: it must carry the core's thread stacks,
written by the core's own signal handler, naming the frame the step hangs in. Then the core is
stopped whole (``kill -STOP``) and asked again: the recording must say why there are no stacks
this time. The recording then replays with the stacks behind ``K``. One engine run for both:
a hung core stopped by an operator is the case as it comes.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from textual.widgets import Static

from stepview.model.flight import ON_SIGNAL
from stepview.model.stacks import ASKED, HUNG_STEP, NONE, CoreStacks
from stepview.testing.scenes import replay_app, until
from stepview.trace.reader import load_trace
from stepview.ui.views.stacks_view import StacksScreen
from tests.e2e.conftest import write_workload
from tests.e2e.terminal import command_env, wait_gone
from tests.reliability.process_watch import Watch, left_behind, watch
from tests.reliability.test_stuck_engine import MULTIPROCESS, descendant_named, stop_process

__all__ = ["watch"]  # the fixture

pytestmark = pytest.mark.engine

HANG_AT = 12  # a few steps in: requests running and waiting
START_S = 300.0  # engine start-up on a busy 2-core machine


def stderr_line(proc: subprocess.Popen[str], needle: str, seen: list[str]) -> str:
    """Read stepview's stderr up to the first line holding ``needle`` (its notices come as
    they are written: this waits on stepview, no clock)."""
    assert proc.stderr is not None
    for line in proc.stderr:
        seen.append(line)
        if needle in line:
            return line
    raise AssertionError(f"stepview ended without {needle!r}:\n{''.join(seen)}")


def hanging_frames(stacks: CoreStacks) -> list[str]:
    (thread,) = [t for t in stacks.dump().threads if t.thread_id == stacks.step_thread]
    return [frame.function for frame in thread.frames]


async def replay_shows(path: Path) -> str:
    app, _ = replay_app(path)
    async with app.run_test(size=(120, 50)) as pilot:
        await until(pilot, lambda: app.check_action("stacks", ()) is True, timeout=60)
        await pilot.press("K")
        await until(pilot, lambda: isinstance(app.screen, StacksScreen))
        return str(app.screen.query_one("#stacks-text", Static).render())


def test_a_hung_then_stopped_engine_core_in_the_flight_recording(
    tmp_path: Path, watch: Watch
) -> None:
    from tests.engine.plugin.hanging_scheduler import HANG_AT_ENV, HANG_FILE_ENV, QUALNAME

    hanging = tmp_path / "hanging"
    flights = tmp_path / "flight"
    workload = write_workload(tmp_path / "workload.jsonl", 16)
    env = {**MULTIPROCESS, HANG_AT_ENV: str(HANG_AT), HANG_FILE_ENV: str(hanging)}
    env["STEPVIEW_STACKS_AFTER_S"] = "2"  # the plug-in's watch writes the hang by itself too
    argv = [sys.executable, "-m", "stepview", "--headless", "--json", "--prompts", str(workload)]
    argv += ["--flight-recorder", "10m", "--flight-dir", str(flights)]
    argv += ["--log-file", str(tmp_path / "log.txt"), "--scheduler-cls", QUALNAME]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=command_env(env),
        cwd=Path(__file__).resolve().parents[2],  # the core imports the scheduler from tests/
    )
    stepview = psutil.Process(proc.pid)
    run = watch(stepview)
    seen: list[str] = []
    try:
        core = descendant_named(stepview, "VLLM::EngineCore", timeout=START_S)
        while not hanging.exists():  # the core writes it as its step hangs
            assert proc.poll() is None, proc.communicate()[1]
            psutil.wait_procs([core], timeout=0.2)
        assert int(hanging.read_text()) == core.pid

        proc.send_signal(signal.SIGUSR1)
        answered = stderr_line(proc, "engine core stacks of", seen)
        assert f"{core.pid} (VLLM::EngineCore): its step thread in hang_in_native_code" in answered

        stop_process(core)
        proc.send_signal(signal.SIGUSR1)
        stopped = stderr_line(proc, "no engine core stacks of", seen)
        assert "is stopped (psutil: 'stopped'" in stopped

        proc.send_signal(signal.SIGTERM)  # stepview gives up on the core and kills it
        wait_gone(stepview, timeout=30)
        rest = proc.communicate(timeout=10)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, "".join(seen)
    assert "the engine did not stop in time" in rest
    assert left_behind(run.close(), timeout=20) == []

    (path,) = flights.glob("flight-*-signal-*.jsonl")
    trace = load_trace(path)
    assert trace.warning is None and trace.header["flight"]["kind"] == ON_SIGNAL
    first, second = trace.stacks
    asked = first.cores[0]
    assert asked.how == ASKED and asked.core == f"{core.pid} (VLLM::EngineCore)"
    assert asked.names[asked.step_thread] == "MainThread"
    frames = hanging_frames(asked)
    # The step thread, at the frame it hangs in: the user's scheduler, under stepview's
    # plug-in, under vLLM's step.
    assert frames[:3] == ["hang_in_native_code", "schedule", "schedule"], frames
    assert "step" in frames and "run_busy_loop" in frames
    assert "stepview-stacks" in asked.names.values()
    for by_itself in [c for c in first.cores[1:] + second.cores[1:] if c.how == HUNG_STEP]:
        assert hanging_frames(by_itself)[0] == "hang_in_native_code"
    gone = second.cores[0]
    assert gone.how == NONE and gone.why_none is not None and "kill -CONT" in gone.why_none
    print(json.dumps([[c.how for c in take.cores] for take in trace.stacks]))

    shown = asyncio.run(replay_shows(path))
    assert "→ hang_in_native_code (hanging_scheduler.py:" in shown
    assert "runs the engine core's steps" in shown and "No stacks: the engine core process" in shown
