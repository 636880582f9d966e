"""``--export-chrome-trace`` from a recorded trace, without vLLM: the file follows the Trace
Event Format and tells what the insight and the snapshots tell (see chrome_checks)."""

from __future__ import annotations

from pathlib import Path

from stepview.files.chrome_trace_file import export_timelines
from stepview.insight.chrome_trace import chrome_trace, track_name
from stepview.insight.counters import CounterPoint
from stepview.insight.timeline import TimelineTracker
from stepview.launch.summary import summarize
from stepview.trace.reader import load_trace
from tests.helpers import DATA
from tests.insight import build
from tests.insight.chrome_checks import check_against_run, load, validate

REPLAY = DATA / "replay.trace.jsonl"


def test_replayed_trace_exports_spans_and_counters_of_the_run(tmp_path: Path) -> None:
    trace = load_trace(REPLAY)
    insight = summarize(trace, keep_steps=True)
    out = tmp_path / "run.json"
    assert insight.step_series is not None
    tracks = export_timelines(out, insight.timelines, insight.step_series.points, "fake")
    snapshots = [trace.snapshots[i] for i in range(len(trace.snapshots))]
    assert tracks == len(snapshots[-1].requests())
    check_against_run(load(out), insight, snapshots)


def test_tokens_drop_to_zero_between_steps_only_when_the_engine_paused() -> None:
    tracker = TimelineTracker()
    points = [
        CounterPoint(1, 0.0, 0.010, 0.5, 2, 1, 64, 0),
        CounterPoint(2, 0.010, 0.020, 0.5, 2, 1, 0, 2),  # straight after step 1
        CounterPoint(3, 0.500, 0.510, 0.0, 0, 0, 0, 2),  # after an idle stretch
    ]
    trace = chrome_trace(tracker, points)
    validate(trace)
    tokens = [(e["ts"], e["args"]) for e in trace["traceEvents"] if e["name"] == "tokens per step"]
    assert tokens == [
        (0, {"prefill": 64, "decode": 0}),
        (10_000, {"prefill": 0, "decode": 2}),
        (20_000, {"prefill": 0, "decode": 0}),
        (500_000, {"prefill": 0, "decode": 2}),
        (510_000, {"prefill": 0, "decode": 0}),
    ]


def test_preempted_request_gets_its_span_and_instant() -> None:
    S = build.S
    tracker = TimelineTracker()
    steps = [
        [build.view("a", S.WAITING, arrival=0.0)],
        [build.view("a", S.DECODING, arrival=0.0, computed=100, out=3)],
        [build.view("a", S.PREEMPTED, arrival=0.0, out=3, preemptions=1)],
        [build.view("a", S.DECODING, arrival=0.0, computed=100, out=4, preemptions=1)],
    ]
    for step, views in enumerate(steps):
        tracker.observe(build.snap(step, step * 0.1, views, step_time=0.05))
    events = chrome_trace(tracker, [])["traceEvents"]
    validate({"traceEvents": events, "displayTimeUnit": "ms"})
    names = [e["name"] for e in events if e["ph"] in ("X", "i")]
    assert "preempted" in names and names.count("preempted") == 2  # the span and the instant
    (instant,) = [e for e in events if e["ph"] == "i"]
    assert instant["args"]["request_id"] == "a" and instant["args"]["computed_tokens_lost"] > 0


def test_track_names_carry_the_id_and_the_start_of_the_prompt() -> None:
    tracker = TimelineTracker()
    long_prompt = build.view("r9", build.S.WAITING)._replace(prompt="word  \n" * 40)
    tracker.observe(build.snap(1, 0.1, [long_prompt]))
    timeline = tracker.get("r9")
    assert timeline is not None
    name = track_name(timeline)
    assert name.startswith("r9: word word") and name.endswith("…") and "\n" not in name
