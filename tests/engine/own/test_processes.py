"""EngineProcesses on plain child processes: which ones are the engine's, and ending them.

Children here are small Python processes standing in for vLLM's: one started before the
engine (as the resource tracker is), one the "engine" starts, stopped with SIGSTOP as a hung
core, one that ignores SIGTERM, and a grandchild re-parented away when its parent dies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from stepview.engine.own.processes import EndedProcesses, EngineProcesses
from stepview.launch.stuck import stuck_line
from tests.e2e.terminal import gone

SLEEPER = "import time; time.sleep(60)"
DEAF = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('deaf', flush=True); time.sleep(60)"
)
# A parent that starts a sleeper of its own, says its pid, and sleeps.
PARENT = (
    "import subprocess, sys, time; "
    f"c = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}]); "
    "print(c.pid, flush=True); time.sleep(60)"
)


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for child in started:
        child.kill()
        child.wait(5)


def spawn(children: list[subprocess.Popen[bytes]], code: str) -> subprocess.Popen[bytes]:
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    children.append(child)
    return child


def stopped(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)
    while psutil.Process(pid).status() != psutil.STATUS_STOPPED:
        time.sleep(0.01)


def test_only_what_the_engine_started_is_ended(children: list[subprocess.Popen[bytes]]) -> None:
    processes = EngineProcesses()
    before = spawn(children, SLEEPER)  # the resource tracker's place: not the engine's
    processes.engine_starting()
    core = spawn(children, SLEEPER)
    processes.engine_up()
    stopped(core.pid)
    assert [p.pid for p in processes.alive()] == [core.pid]
    ended = processes.end()
    assert len(ended.killed) == 1 and ended.killed[0].startswith(f"{core.pid} (")
    assert ended.survived == ()
    assert gone(psutil.Process(core.pid))  # a zombie until reaped: dead all the same
    assert before.poll() is None  # never touched
    assert processes.end() == EndedProcesses()  # nothing left to end


def test_sigterm_ignored_means_sigkill_after_the_grace(
    children: list[subprocess.Popen[bytes]],
) -> None:
    processes = EngineProcesses()
    processes.engine_starting()
    deaf = spawn(children, DEAF)
    assert deaf.stdout is not None and deaf.stdout.readline() == b"deaf\n"  # handler set
    processes.engine_up()
    started = time.monotonic()
    ended = processes.end(grace=0.2)
    assert time.monotonic() - started >= 0.2
    assert ended.killed and deaf.wait(5) == -signal.SIGKILL


def test_a_grandchild_re_parented_away_is_still_ended(
    children: list[subprocess.Popen[bytes]],
) -> None:
    """vLLM's worker, child of the core: once the core dies it is no descendant of ours."""
    processes = EngineProcesses()
    processes.engine_starting()
    parent = spawn(children, PARENT)
    assert parent.stdout is not None
    grandchild = psutil.Process(int(parent.stdout.readline()))
    processes.engine_up()
    parent.kill()
    parent.wait(5)
    assert grandchild.ppid() != os.getpid() and grandchild.is_running()
    ended = processes.end()
    assert any(name.startswith(f"{grandchild.pid} (") for name in ended.killed)
    assert gone(grandchild)


def test_an_engine_that_never_came_up_still_has_its_processes_ended(
    children: list[subprocess.Popen[bytes]],
) -> None:
    processes = EngineProcesses()
    processes.engine_starting()
    core = spawn(children, SLEEPER)  # hung in start-up: engine_up() never came
    # SIGTERM ends it; on a loaded machine it may not get the CPU to die within the grace,
    # and SIGKILL follows: ended either way.
    assert processes.end().killed and core.wait(5) in (-signal.SIGTERM, -signal.SIGKILL)


def test_no_engine_started_means_nothing_is_touched(
    children: list[subprocess.Popen[bytes]],
) -> None:
    other = spawn(children, SLEEPER)
    assert EngineProcesses().end() == EndedProcesses()
    assert other.poll() is None


def test_the_exit_line_names_what_happened() -> None:
    assert stuck_line(EndedProcesses()) == "the engine did not stop in time; exiting anyway"
    assert stuck_line(EndedProcesses(killed=("12 (VLLM::EngineCore)",))) == (
        "the engine did not stop in time; its process 12 (VLLM::EngineCore) was killed"
    )
    both = EndedProcesses(killed=("12 (A)", "13 (B)"), survived=("14 (C)",))
    assert stuck_line(both) == (
        "the engine did not stop in time; its processes 12 (A), 13 (B) were killed; "
        "its process 14 (C) could not be killed"
    )


def test_stopped_says_when_an_engine_process_will_never_answer(
    children: list[subprocess.Popen[bytes]],
) -> None:
    """A quit waits for the engine only while it may answer: not for a stopped core."""
    processes = EngineProcesses()
    outside = spawn(children, SLEEPER)
    processes.engine_starting()
    core = spawn(children, SLEEPER)
    processes.engine_up()
    assert not processes.stopped()
    stopped(outside.pid)  # not the engine's: its state says nothing of the engine
    assert not processes.stopped()
    stopped(core.pid)
    assert processes.stopped()
    os.kill(core.pid, signal.SIGCONT)
    while psutil.Process(core.pid).status() == psutil.STATUS_STOPPED:
        time.sleep(0.01)
    assert not processes.stopped()
    os.kill(outside.pid, signal.SIGCONT)
