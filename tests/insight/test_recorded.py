"""Live and replayed insight agree: the driver's timelines, results file, trace and summary.

A fake engine with a tiny KV cache preempts one request again and again (a thrash alert);
the run is recorded, and the trace replayed through a fresh RunInsight must give the same
timelines, figures and alerts as the live run, which also went into the results file, the
snapshots and the trace's ``alert`` lines.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

from stepview.engine.driver.loop import Driver
from stepview.insight.report import format_summary
from stepview.insight.run import RunInsight
from stepview.launch.summary import summarize
from stepview.model.alerts import THRASH
from stepview.testing.fake_engine import FakeEngine
from stepview.trace.reader import load_trace
from tests.helpers import DATA
from tests.trace.runs import add, record, run_to_end

REPLAY_V1 = DATA / "replay.trace.jsonl"


def _thrashing_run(tmp_path: Path) -> tuple[Driver, Path, Path]:
    def script(driver: Driver) -> None:
        for i in range(3):
            add(driver, f"p{i}", "z" * 30, max_tokens=40, temperature=0.0)
        run_to_end(driver, 3)

    engine = FakeEngine(num_kv_blocks=6, max_num_batched_tokens=512)
    return record(tmp_path, script, engine)


def test_live_and_replayed_insight_agree(tmp_path: Path) -> None:
    driver, trace_path, _results_path = _thrashing_run(tmp_path)
    live = driver.insight
    summary = live.summary()
    assert summary["preemptions"]["count"] >= 3
    assert [a["kind"] for a in summary["alerts"]] == [THRASH]
    # The alert was in the snapshots while it held, and in the trace once.
    shown = [s.alerts for s in driver.history() if s.alerts]
    assert shown and shown[0][0].kind == THRASH
    lines = [json.loads(line) for line in trace_path.read_text().splitlines()]
    alert_lines = [line for line in lines if line.get("k") == "alert"]
    assert [{k: v for k, v in a.items() if k != "k"} for a in alert_lines] == summary["alerts"]
    # Replayed: the same answers.
    replayed = summarize(load_trace(trace_path))
    assert replayed.summary() == summary
    for rid in ("p0", "p1", "p2"):
        assert replayed.request_fields(rid) == live.request_fields(rid)


def test_preemptions_in_the_timeline_match_the_snapshots(tmp_path: Path) -> None:
    driver, _, _ = _thrashing_run(tmp_path)
    history = driver.history()
    for view in history[-1].finished:
        fields = driver.insight.request_fields(view.request_id)
        assert len(fields["preemptions"]) == view.num_preemptions
        steps = [p["step"] for p in fields["preemptions"]]
        seen = [
            s.step
            for prev, s in itertools.pairwise(history)
            if (v := s.find(view.request_id)) is not None
            and (u := prev.find(view.request_id)) is not None
            and v.num_preemptions > u.num_preemptions
        ]
        assert steps == seen
        states = [seg["state"] for seg in fields["timeline"]]
        assert states[0] == "waiting" and states[-1] == "decode"
        # One preempted stretch per preemption (a stretch splits where its reason changes).
        stretches = [b for a, b in itertools.pairwise(["", *states]) if b == "preempted" != a]
        assert len(stretches) == view.num_preemptions
        # Every output token was generated in a prefill step (the first, and after each
        # preemption) or a decode step.
        decoded = sum(seg.get("tokens_generated", 0) for seg in fields["timeline"])
        assert view.output_tokens - 1 - view.num_preemptions <= decoded < view.output_tokens


def test_results_file_carries_timelines(tmp_path: Path) -> None:
    driver, _, results_path = _thrashing_run(tmp_path)
    records = [json.loads(line) for line in results_path.read_text().splitlines()]
    assert len(records) == 3
    for rec in records:
        assert rec["timeline"] == driver.insight.request_fields(rec["id"])["timeline"]
        assert len(rec["preemptions"]) == rec["num_preemptions"]


def test_version_1_trace_summary() -> None:
    trace = load_trace(REPLAY_V1)
    assert trace.version == 1
    summary = summarize(trace).summary()
    assert summary["latency"]["finished"] == 6
    text = format_summary(summary)
    assert text.startswith("stepview summary: ")
    assert "queue time (s)" in text and text.endswith("alerts: none")


def test_replay_summary_command_needs_neither_vllm_nor_textual() -> None:
    code = (
        "import sys\n"
        "from stepview.cli import main\n"
        f"code = main(['--replay', {str(REPLAY_V1)!r}, '--summary'])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'vllm', 'torch', 'transformers', 'textual'} or m.startswith('stepview.ui'))\n"
        "assert not bad, bad\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("stepview summary: 56 steps, 6 requests finished")


def test_summary_goes_with_replay_only() -> None:
    from stepview.cli import main

    assert main(["--summary"]) == 2


def test_insight_cost_per_step(tmp_path: Path) -> None:
    """RunInsight.observe over a recorded 64-request run (the driver does it every step);
    ``pytest -s`` prints the cost per snapshot (about 30 us on the 2-core dev box)."""

    def script(driver: Driver) -> None:
        for i in range(64):
            add(driver, f"r{i}", "x" * (20 + i), max_tokens=24, temperature=0.0)
        run_to_end(driver, 64)

    engine = FakeEngine(max_num_seqs=32, num_kv_blocks=48, max_num_batched_tokens=256)
    driver, _, _ = record(tmp_path, script, engine)
    history = driver.history()
    best = float("inf")
    for _ in range(3):
        insight = RunInsight()
        started = time.perf_counter()
        for snapshot in history:
            insight.observe(snapshot)
        best = min(best, time.perf_counter() - started)
    per_step = best / len(history)
    print(f"insight: {per_step * 1e6:.1f} us per snapshot over {len(history)} snapshots")
    # No timed assertion (shared CI machines, see tests/bench): the figure is for people.
    assert insight.summary()["latency"]["finished"] == 64
