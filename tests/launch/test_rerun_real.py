"""``--rerun`` end to end on real vLLM (demo model): a recorded greedy run of text prompts and
a synthetic load (token ids) sent again, with the same flags (the same tokens, every request
matched) and with half the seats (the compare names where the scheduler first decided
otherwise)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from stepview.insight.compare import compare_runs
from stepview.trace.reader import load_trace
from tests.e2e.terminal import command_env

PROMPTS = (
    # No ignore_eos: each ends on its own stop or runs out of max_tokens (then it is forced).
    {"id": "fox", "prompt": "The quick brown fox", "params": {"temperature": 0, "max_tokens": 6}},
    {"id": "once", "prompt": "Once upon a time", "params": {"temperature": 0, "max_tokens": 5}},
)
LOAD = ("--load", "6", "--rate", "inf", "--load-seed", "1", "--output-len", "4:8")
GREEDY_LOAD = (*LOAD, "--load-mix", "greedy")
SEATS = 4


def stepview(args: Sequence[str], folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stepview", "--log-file", str(folder / "log.txt"), *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=command_env(),
        cwd=folder,
    )


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded run: two text prompts and six prompts of token ids, at once, 4 seats."""
    folder = tmp_path_factory.mktemp("original")
    prompts = folder / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    trace = folder / "original.trace.jsonl"
    args = ["--headless", "--prompts", str(prompts), *GREEDY_LOAD, "--record", str(trace)]
    done = stepview([*args, "--max-num-seqs", str(SEATS)], folder)
    assert done.returncode == 0, done.stderr
    return trace


def _final(trace: Path) -> dict[str, dict[str, object]]:
    """Each request's tokens (per sample) and whether it ran out of max_tokens on its own."""
    loaded = load_trace(trace)
    last = loaded.snapshots[len(loaded.snapshots) - 1]
    return {
        v.request_id: {
            "tokens": [list(c.token_ids) for c in v.completions],
            "ran_out": not v.spec.ignore_eos
            and all(c.finish_reason == "length" for c in v.completions),
        }
        for v in last.requests()
    }


@pytest.mark.engine
def test_a_greedy_rerun_with_the_same_flags_makes_the_same_tokens(
    original: Path, tmp_path: Path
) -> None:
    rerun, results = tmp_path / "rerun.trace.jsonl", tmp_path / "results.jsonl"
    args = ["--rerun", str(original), "--headless", "--json", "--max-num-seqs", str(SEATS)]
    done = stepview([*args, "--record", str(rerun), "--results", str(results)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"rerunning 8 request(s) of {original}" in done.stderr
    assert "the rerun runs the trace's model, demo-tiny" in done.stderr
    recorded = _final(original)
    printed = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert {rid: [c["token_ids"] for c in r["completions"]] for rid, r in printed.items()} == {
        rid: request["tokens"] for rid, request in recorded.items()
    }
    # Held to their recorded length: the text prompts that ran out of max_tokens (the load's
    # had ignore_eos already); every record says whether it was, the results file's too.
    forced = {rid for rid, r in printed.items() if r["rerun"]["forced"]}
    assert forced == {rid for rid, request in recorded.items() if request["ran_out"]}
    assert forced <= {"fox", "once"}
    kept = [json.loads(line) for line in results.read_text().splitlines()]
    assert {r["id"]: r["rerun"] for r in kept} == {rid: r["rerun"] for rid, r in printed.items()}
    assert re.search(r"stepview: (no|first) scheduling difference", done.stderr), done.stderr
    assert load_trace(rerun).header["rerun"]["of"] == str(original)


@pytest.mark.engine
def test_half_the_seats_names_the_first_divergence(original: Path, tmp_path: Path) -> None:
    rerun = tmp_path / "rerun.trace.jsonl"
    args = ["--rerun", str(original), "--summary", "--max-num-seqs", str(SEATS // 2)]
    done = stepview([*args, "--record", str(rerun)], tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "requests matched: 8 (8 by id, 0 by prompt" in out, out
    named = re.search(r"first scheduling difference: step (\d+) — A schedules (.*), B ", out)
    assert named is not None, out
    a, b = load_trace(original).snapshots, load_trace(rerun).snapshots
    assert int(named.group(1)) == compare_runs(a, b, aligned=True).divergence.step
    # Where they part: the original ran more than the rerun's seats, which it never did.
    assert max(s.counters.running for s in a) > SEATS // 2
    assert max(s.counters.running for s in b) <= SEATS // 2
