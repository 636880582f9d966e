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


# A "server" that answers /health and says what the plug-in says when its port is taken.
TAKEN = (
    "import http.server, sys;"
    "print('ERROR stepview: cannot publish on STEPVIEW_PUBLISH=tcp://127.0.0.1:1 (rank 0): "
    "Address already in use', flush=True);"
    "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), "
    "http.server.SimpleHTTPRequestHandler).serve_forever()"
)


def test_a_server_whose_plug_in_cannot_publish_fails_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    (tmp_path / "health").write_text("ok")  # what SimpleHTTPRequestHandler serves at /health
    command = [sys.executable, "-c", TAKEN, str(port)]
    api = ApiServer(command, dict(os.environ), port, tmp_path / "log")
    monkeypatch.chdir(tmp_path)  # the server serves its working folder
    with pytest.raises(RuntimeError, match=r"plug-in is not publishing: .*Address already in use"):
        api.start()
    assert api.process is None


def test_free_ports_are_outside_the_kernels_ephemeral_range_and_never_repeat() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(port < low for port in ports)
