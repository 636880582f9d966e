"""Synthetic load and timed prompts, end to end: the real command on real vLLM (demo model)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from stepview.files.csv_export import COLUMNS
from stepview.launch.summary import summarize
from stepview.model.load import LenRange, LoadSpec, plan_load
from stepview.trace.reader import load_trace
from tests.insight.chrome_checks import check_against_run, load


@pytest.mark.engine
def test_load_40_at_once_gives_40_results_of_the_asked_lengths(  # type: ignore[no-untyped-def]
    run_stepview, tmp_path: Path
) -> None:
    out = tmp_path / "load.csv"
    args = ["--load", "40", "--rate", "inf", "--input-len", "4:12", "--output-len", "2:6"]
    done = run_stepview(["--headless", "--json", *args, "--export-csv", str(out)])
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(records) == 40
    # The same flags make the same requests: the plan says what each one asked for.
    spec = LoadSpec(count=40, input_len=LenRange(4, 12), output_len=LenRange(2, 6))
    plan = {a.request.request_id: a.request for a in plan_load(spec)}
    assert {r["id"] for r in records} == set(plan)
    for record in records:
        asked = plan[record["id"]]
        assert record["state"] == "finished"
        assert record["prompt_token_ids"] == list(asked.prompt_token_ids)
        (completion,) = record["completions"]
        assert len(completion["token_ids"]) == asked.spec.max_tokens
        assert completion["finish_reason"] == "length"
    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == COLUMNS
    assert len(rows) == 40
    by_id = {row["id"]: row for row in rows}
    for request_id, asked in plan.items():
        assert int(by_id[request_id]["prompt_tokens"]) == len(asked.prompt_token_ids)
        assert int(by_id[request_id]["output_tokens"]) == asked.spec.max_tokens
    arrivals = [float(row["arrival"]) for row in rows]
    assert max(arrivals) - min(arrivals) < 0.05  # rate inf: all at once, in one loop


@pytest.mark.engine
def test_prompts_file_at_spaces_the_arrivals(run_stepview, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    prompts = tmp_path / "timed.jsonl"
    lines = [
        {"id": f"t{i}", "prompt": "To be or not", "params": {"max_tokens": 2}, "at": at}
        for i, at in enumerate((0, 1.0, 2.0))
    ]
    prompts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = run_stepview(["--headless", "--json", "--prompts", str(prompts)])
    assert done.returncode == 0, done.stderr
    arrival = {r["id"]: r["timings"]["arrival"] for r in map(json.loads, done.stdout.splitlines())}
    assert set(arrival) == {"t0", "t1", "t2"}
    assert arrival["t1"] - arrival["t0"] == pytest.approx(1.0, abs=0.25)
    assert arrival["t2"] - arrival["t0"] == pytest.approx(2.0, abs=0.25)


@pytest.mark.engine
def test_chrome_trace_of_a_run_with_preemptions(run_stepview, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A KV cache too small for the load makes vLLM preempt; the Chrome trace written at the
    end of the live run tells the run its recording tells (spans, preemptions, counters)."""
    out = tmp_path / "run.json"
    record = tmp_path / "run.trace.jsonl"
    args = ["--load", "24", "--rate", "inf", "--kv-cache-memory-bytes", "4194304"]
    done = run_stepview(
        ["--headless", "--json", *args, "--record", str(record), "--export-chrome-trace", str(out)]
    )
    assert done.returncode == 0, done.stderr
    assert "24 request track(s) exported to" in done.stderr
    trace = load_trace(record)
    snapshots = [trace.snapshots[i] for i in range(len(trace.snapshots))]
    exported = load(out)
    check_against_run(exported, summarize(trace, keep_steps=True), snapshots)
    preempted = [e for e in exported["traceEvents"] if e["ph"] == "i"]
    assert preempted, "the tiny KV cache made no preemption"
