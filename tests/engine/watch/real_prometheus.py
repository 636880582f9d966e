"""The real Prometheus server (``/usr/bin/prometheus``, Debian's 2.42), started by a test.

A test that needs it and cannot have it fails, saying why: the suite's claim is that stepview
reads what the real server answers, and a skip would let that claim go unchecked in silence.
The server runs on a free port with the test's own config and storage (in the test's folder),
in a process group of its own, and is stopped whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stepview.testing.vllm_server import free_port

READY_S = 60.0
INSTALL = (
    "the real Prometheus is needed here and 'prometheus' is not on PATH: install it "
    "(apt-get install prometheus, Debian's 2.42; scripts/setup.sh does where it can)"
)


def prometheus_binary() -> str:
    """The ``prometheus`` command, or the test fails saying how to get it."""
    found = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK) else None
    )
    if found is None:
        pytest.fail(INSTALL)
    return found


def file_sd_job(job: str, targets_file: Path) -> dict[str, Any]:
    """A scrape config reading ``targets_file`` (re-read at once on change, and every 1 s)."""
    return {
        "job_name": job,
        "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "1s"}],
    }


@contextlib.contextmanager
def running_prometheus(folder: Path, scrape_configs: list[dict[str, Any]]) -> Iterator[str]:
    """A Prometheus scraping every second with ``scrape_configs``, and itself (job
    ``prometheus``, as its example config does); yields its ``HOST:PORT`` once ready."""
    binary = prometheus_binary()
    port = free_port()
    itself = {"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
    config = folder / "prometheus.yml"
    config.write_text(  # JSON is YAML: no YAML writer needed
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                "scrape_configs": [*scrape_configs, itself],
            }
        )
    )
    log = folder / "prometheus.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'prometheus-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            process_group=0,
        )
    try:
        _wait_ready(port, process, log)
        yield f"127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def _wait_ready(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"prometheus exited ({process.returncode}); its log ends:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"prometheus not ready in {READY_S:.0f} s; its log ends:\n{_tail(log)}")


def _tail(log: Path, lines: int = 10) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def write_targets(path: Path, groups: list[dict[str, Any]]) -> None:
    """Replace a file_sd file whole (a rename), as Prometheus' docs advise."""
    new = path.with_suffix(".new")
    new.write_text(json.dumps(groups))
    os.replace(new, path)
