"""The API server the real-server tests and benchmarks start: never left behind.

A set-up that fails (a server that dies, or that does not answer in time on a loaded
machine) used to leave the server running: the test's fixture never reached its clean-up,
and the server took memory and CPU from every test after it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from stepview.testing import vllm_server
from stepview.testing.vllm_server import ApiServer, free_port

# A "server" that starts a child (the engine core's place) and never answers.
SILENT = (
    "import subprocess, sys, time;"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']);"
    "print('loading', flush=True); time.sleep(600)"
)


def test_a_server_that_does_not_answer_in_time_is_killed_with_its_children(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vllm_server, "START_TIMEOUT_S", 2.0)
    api = ApiServer([sys.executable, "-c", SILENT], dict(os.environ), free_port(), tmp_path / "log")
    with pytest.raises(RuntimeError, match=r"did not answer in 2 s; .* ends:\nloading"):
        api.start()
    assert api.process is None
    deadline = time.monotonic() + 10  # SIGKILL is sent: wait for the kernel to end them
    while leftovers := [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if "time.sleep(600)" in " ".join(p.info["cmdline"] or [])
    ]:
        assert time.monotonic() < deadline, f"left running: {leftovers}"
        time.sleep(0.05)


def test_a_server_that_dies_says_how_its_log_ends(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "print('no such model'); raise SystemExit(3)"]
    api = ApiServer(command, dict(os.environ), free_port(), tmp_path / "log")
    with pytest.raises(RuntimeError, match=r"died \(exit 3\); .* ends:\nno such model"):
        api.start()
