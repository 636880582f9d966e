"""The last-resort exit after a signal: a process whose way out is stuck still leaves.

Run in a child process, as the watchdog ends the whole process with ``os._exit``.
"""

from __future__ import annotations

import subprocess
import sys
import time

CHILD = """
import threading, time
from stepview.launch.runner import arm_exit_watchdog
arm_exit_watchdog(0.5, 129)
threading.Event().wait(30)  # stuck, as Textual's writer was on a terminal that was gone
"""

DONE_IN_TIME = """
from stepview.launch.runner import arm_exit_watchdog
arm_exit_watchdog(60.0, 129)
print("left by itself")
"""


def test_a_stuck_process_leaves_with_the_signal_code() -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", CHILD], timeout=20, check=False)
    assert done.returncode == 129
    assert time.monotonic() - started < 15


def test_a_process_that_leaves_by_itself_is_not_held_by_the_watchdog() -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", DONE_IN_TIME], capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0 and done.stdout.strip() == "left by itself"
    # A daemon timer: it does not keep the process (held, it would take 60 s).
    assert time.monotonic() - started < 30
