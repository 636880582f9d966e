"""``SIGUSR1`` and ``SIGUSR2`` in start-up never end stepview (issue 31): each is answered once.

Operators send ``SIGUSR1`` for a flight recording, often to a unit systemd has just restarted.
Its default action ends the process: before stepview answered it from its first line, a
headless run signalled while vLLM was imported died with exit 138, nothing printed or saved.
``SIGUSR2`` (sent by tools to reopen logs) ended it at any moment. The launcher sends the
signals from inside start-up (``user-signals-in-start-up``), so the test holds
that moment instead of racing it; the run must then go on and end as it would have.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from stepview.launch.user_signals import NO_RECORDER, STARTING, STOPPING, USR2, answer
from tests.e2e.conftest import write_workload
from tests.e2e.terminal import command_env
from tests.reliability.launcher import LAUNCHER


@pytest.mark.engine
@pytest.mark.parametrize("recorder", [False, True], ids=["no-recorder", "recorder"])
def test_user_signals_in_start_up_are_answered_once_and_the_run_goes_on(
    tmp_path: Path, recorder: bool
) -> None:
    workload = write_workload(tmp_path / "workload.jsonl", 3, longest=16)
    results = tmp_path / "results.jsonl"
    flight = ["--flight-recorder", "10m", "--flight-dir", str(tmp_path / "flight")]
    done = subprocess.run(
        [
            *LAUNCHER,
            "user-signals-in-start-up",
            "--",
            *("--headless", "--prompts", str(workload), "--results", str(results)),
            *("--log-file", str(tmp_path / "log.txt")),
            *(flight if recorder else []),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        env=command_env(),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    said = f"stepview: {STARTING if recorder else NO_RECORDER}\n"
    assert done.stderr.count(said) == 1, done.stderr  # two signals, one line
    assert done.stderr.count(f"stepview: {USR2}\n") == 1, done.stderr
    saved = [json.loads(line) for line in results.read_text().splitlines()]
    assert [r["id"] for r in saved] == ["r0", "r1", "r2"]
    assert {r["state"] for r in saved} == {"finished"}
    if recorder:  # asked for before the first step: nothing written, not an empty recording
        assert not list((tmp_path / "flight").glob("*"))


def test_the_answer_says_why_for_each_moment() -> None:
    assert answer("starting", None) == STARTING  # before the flags are parsed
    assert answer("starting", True) == STARTING
    assert answer("stopping", True) == STOPPING
    assert answer("starting", False) == answer("stopping", False) == NO_RECORDER
