"""stepview's side of its own engine core's stacks, on a real process that hangs (no vLLM).

The core is :mod:`tests.engine.own.stacks_child`: the plug-in's stack watch in a process of
its own, hung in :func:`~tests.engine.own.stacks_child.hang_in_a_step` holding the GIL in
native code, or waiting with it free. :class:`OwnCoreStacks` asks it with the signal, as a
flight recording does; then the process is stopped whole (``kill -STOP``) and asked again.
The engine tests (``tests/reliability/test_core_stacks_real.py``) do the same on vLLM.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from stepview.engine.own.core_stacks import OwnCoreStacks
from stepview.engine.records import stacks as files
from stepview.model.stacks import ASKED, HUNG_STEP, NONE, WATCHDOG, CoreStacks
from tests.helpers import ROOT
from tests.reliability.test_stuck_engine import stop_process

CHILD = Path(__file__).with_name("stacks_child.py")
WAIT_S = 30.0  # for a file the child writes, on a busy machine


@pytest.fixture
def probe() -> Iterator[OwnCoreStacks]:
    made = OwnCoreStacks()
    yield made
    made.close()
    assert files.STACKS_DIR_ENV not in os.environ and not made.folder.exists()


@pytest.fixture
def hanging(probe: OwnCoreStacks, request: pytest.FixtureRequest) -> Iterator[psutil.Process]:
    """The child, hung as ``request.param`` says (``gil`` or ``wait``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(probe.folder), request.param],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "hanging"
        yield psutil.Process(child.pid)
    finally:
        child.kill()
        child.wait()


def written(path: Path) -> None:
    """Wait until the child has written ``path`` (another process: no event to wait on)."""
    deadline = time.monotonic() + WAIT_S
    while not (path.exists() and path.stat().st_size):
        assert time.monotonic() < deadline, f"{path.name} not written in {WAIT_S} s"
        time.sleep(0.05)


def hanging_frames(stacks: CoreStacks) -> list[str]:
    """The frames of the thread that runs the steps, most recent first."""
    (thread,) = [t for t in stacks.dump().threads if t.thread_id == stacks.step_thread]
    return [frame.function for frame in thread.frames]


@pytest.mark.parametrize("hanging", ["gil"], indirect=True)
def test_a_core_holding_the_gil_answers_the_signal_and_its_watchdog_fires_then_stopped_it_cannot(
    probe: OwnCoreStacks, hanging: psutil.Process
) -> None:
    # The watch cannot run to write the hang; faulthandler's watchdog does, without the GIL.
    written(files.watchdog_file(probe.folder, hanging.pid))
    assert not files.hung_file(probe.folder, hanging.pid).exists()
    # (The signal cuts libc's sleep short: the watch may run once, between two sleeps, and
    # write the hang too.)
    asked, *automatic = probe.take(since=0.0)
    (fired,) = [stacks for stacks in automatic if stacks.how == WATCHDOG]
    assert asked.how == ASKED and asked.core == f"{hanging.pid} ({hanging.name()})"
    frame = asked.step_frame()  # the C handler answered, GIL or not
    assert frame is not None and frame.function == "hang_in_a_step"
    assert fired.how == WATCHDOG and fired.dump().timeout is not None
    assert hanging_frames(fired)[0] == "hang_in_a_step"

    stop_process(hanging)
    stopped, *before = probe.take(since=0.0)
    assert stopped.how == NONE and stopped.text == ""
    assert stopped.why_none is not None and "is stopped (psutil: 'stopped'" in stopped.why_none
    assert f"kill -CONT {hanging.pid}" in stopped.why_none
    assert WATCHDOG in [stacks.how for stacks in before]  # what was written before goes in


@pytest.mark.parametrize("hanging", ["wait"], indirect=True)
def test_a_core_waiting_with_the_gil_free_is_written_by_the_watch_and_answers_the_signal(
    probe: OwnCoreStacks, hanging: psutil.Process
) -> None:
    written(files.hung_file(probe.folder, hanging.pid))
    asked, by_itself = probe.take(since=0.0)
    assert asked.how == ASKED and "hang_in_a_step" in hanging_frames(asked)
    assert by_itself.how == HUNG_STEP and "hang_in_a_step" in hanging_frames(by_itself)
    assert "no step had ended for" in by_itself.note
    # Only what was written since the recording's start goes in it.
    (again,) = probe.take(since=time.time() + 60)
    assert again.how == ASKED
    # The watch kept re-arming the watchdog: it never fired.
    assert not files.watchdog_file(probe.folder, hanging.pid).stat().st_size
