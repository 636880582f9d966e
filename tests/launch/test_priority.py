"""``--nice`` against a server in another session: the session's autogroup goes down too.

Each case runs a child in a session of its own (as a tmux pane or an ssh login is), which
lowers its priority as an attached stepview does and leaves a process behind in the same
session, to read the autogroup after the child has gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from stepview.launch.priority import AUTOGROUP_ENABLED

pytestmark = pytest.mark.skipif(
    not AUTOGROUP_ENABLED.exists() or AUTOGROUP_ENABLED.read_text().strip() != "1",
    reason="this kernel schedules no autogroups: a process's nice counts machine-wide",
)

LOWERS = """
import os, subprocess, sys
from stepview.launch.priority import lower_priority, read_autogroup_nice
early = sys.argv[1] == "early"
sleeper = None
quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # the caller reads to EOF
if early:  # other work in the session before stepview starts
    sleeper = subprocess.Popen(["sleep", "60"], **quiet)
lower_priority(10)
if not early:  # started later by stepview's session: it outlives stepview
    sleeper = subprocess.Popen(["sleep", "60"], **quiet)
print(sleeper.pid, os.nice(0), read_autogroup_nice(), flush=True)
"""


def autogroup_nice(pid: int) -> int:
    """A process's autogroup's nice value, as ``/proc/PID/autogroup`` says it."""
    return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])


def run_alone_in_a_session(case: str) -> tuple[int, int, int]:
    """The sleeper left behind, stepview's nice and its autogroup's as it ran."""
    child = subprocess.run(
        [sys.executable, "-c", LOWERS, case],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        start_new_session=True,
    )
    sleeper, nice, group = map(int, child.stdout.split())
    return sleeper, nice, group


def ended(pid: int) -> None:
    """The sleeper gone (init reaps it: its parent has exited)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_alone_in_its_session_it_lowers_the_autogroup_and_puts_it_back() -> None:
    sleeper, nice, group = run_alone_in_a_session("late")
    try:
        assert nice == min(os.nice(0) + 10, 19)
        assert group == 10  # a new session's autogroup starts at 0
        assert autogroup_nice(sleeper) == 0  # stepview has exited: the session's is back
    finally:
        ended(sleeper)


def test_beside_other_work_in_its_session_it_lowers_only_itself() -> None:
    sleeper, nice, group = run_alone_in_a_session("early")
    try:
        assert nice == min(os.nice(0) + 10, 19)
        assert group == 0
        assert autogroup_nice(sleeper) == 0
    finally:
        ended(sleeper)
