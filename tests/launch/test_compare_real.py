"""``--compare`` end to end: two real vLLM runs (demo model) of one load, 4 seats against 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def _scheduled_at(path: Path, step: int) -> dict[str, int]:
    """Tokens scheduled per request at ``step``, read straight from the trace's lines."""
    tokens: dict[str, int] = {}
    for raw in path.read_text().splitlines()[1:]:
        line = json.loads(raw)
        if line["k"] == "step" and line["step"] == step:
            for key in ("new", "upd"):
                tokens.update({d["id"]: d["st"] for d in line.get(key, ()) if d.get("st")})
    return tokens


@pytest.mark.engine
def test_compare_two_real_runs(run_stepview, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    traces = []
    for seqs in (4, 2):
        trace = tmp_path / f"seqs{seqs}.trace.jsonl"
        args = ["--load", "6", "--rate", "inf", "--load-seed", "1", "--output-len", "4:8"]
        done = run_stepview(
            ["--headless", *args, "--max-num-seqs", str(seqs), "--record", str(trace)]
        )
        assert done.returncode == 0, done.stderr
        traces.append(trace)
    a, b = traces
    done = run_stepview(["--replay", str(a), "--compare", str(b), "--summary"])
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "requests matched: 6 (6 by id, 0 by prompt" in out
    # Both runs start with the whole load waiting: step 1 already fills 4 seats against 2.
    first_a, first_b = _scheduled_at(a, 1), _scheduled_at(b, 1)
    assert len(first_a) == 4 and len(first_b) == 2
    ids_a = " ".join(sorted(first_a))
    assert (
        f"first scheduling difference: step 1 — A schedules {ids_a} "
        f"({sum(first_a.values())} tokens)" in out
    )
