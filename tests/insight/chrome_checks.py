"""Checks of an exported Chrome trace: the Trace Event Format's rules, and the run it tells.

Perfetto's own trace processor (the ``perfetto`` package) downloads its binary from outside
the package registries at first use, which neither CI nor a developer's machine can reach, so
the file is checked against the format's documented rules instead (the Trace Event Format
document: required keys per phase, microsecond ``ts``/``dur``, complete events of one thread
that nest, metadata naming processes and threads), then against the insight and the
snapshots it was built from.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from stepview.insight.run import RunInsight
from stepview.model.snapshot import StepSnapshot

# Keys every event of a phase must carry (the format document's "required" per phase).
REQUIRED = {
    "X": {"name", "ph", "ts", "dur", "pid", "tid"},
    "i": {"name", "ph", "ts", "pid", "tid", "s"},
    "C": {"name", "ph", "ts", "pid", "args"},
    "M": {"name", "ph", "pid", "args"},
}
METADATA = {"process_name", "thread_name", "thread_sort_index", "process_sort_index"}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def validate(trace: dict[str, Any]) -> None:
    """The JSON object form of the format, as chrome://tracing and Perfetto read it."""
    assert isinstance(trace["traceEvents"], list)
    assert trace["displayTimeUnit"] in ("ms", "ns")
    json.dumps(trace, allow_nan=False)  # no NaN or Infinity: not JSON
    spans: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    named_threads: set[tuple[int, int]] = set()
    used_threads: set[tuple[int, int]] = set()
    for event in trace["traceEvents"]:
        ph = event["ph"]
        assert ph in REQUIRED, event
        assert REQUIRED[ph] <= event.keys(), event
        assert isinstance(event["name"], str) and isinstance(event["pid"], int)
        if ph == "M":
            assert event["name"] in METADATA, event
            if event["name"] == "thread_name":
                assert isinstance(event["args"]["name"], str) and event["args"]["name"]
                named_threads.add((event["pid"], event["tid"]))
            continue
        assert _number(event["ts"]), event
        if ph == "C":
            assert event["args"] and all(_number(v) for v in event["args"].values()), event
            continue
        used_threads.add((event["pid"], event["tid"]))
        if ph == "i":
            assert event["s"] in ("t", "p", "g"), event
        else:
            assert _number(event["dur"]), event
            spans[(event["pid"], event["tid"])].append((event["ts"], event["ts"] + event["dur"]))
    assert used_threads <= named_threads, "a thread without thread_name metadata"
    for thread, intervals in spans.items():
        intervals.sort()
        for (_, end), (start, _) in itertools.pairwise(intervals):
            assert end <= start, f"complete events overlap on thread {thread}"


def load(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        trace: dict[str, Any] = json.load(handle)
    return trace


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def check_against_run(
    trace: dict[str, Any], insight: RunInsight, snapshots: Sequence[StepSnapshot]
) -> None:
    """Spans are the insight's timelines, one thread per request in order of arrival, an
    instant per preemption; counters are the snapshots' figures, one sample per step."""
    validate(trace)
    events = trace["traceEvents"]
    last = snapshots[-1]
    requests = last.requests()
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert len(names) == len(requests)
    # Every request's events name it; threads by arrival: tid 1 came first.
    tid_of = {e["args"]["request_id"]: e["tid"] for e in events if e["ph"] in ("X", "i")}
    for rid, tid in tid_of.items():
        assert names[tid].startswith(rid)
    assert set(tid_of) == {v.request_id for v in requests}
    arrival = {v.request_id: v.timings.arrival for v in requests}
    by_tid = sorted(tid_of, key=tid_of.__getitem__)
    assert [arrival[r] for r in by_tid] == sorted(arrival.values())
    tracker = insight.timelines
    for view in requests:
        tid = tid_of[view.request_id]
        records = tracker.records(view.request_id)
        spans = [e for e in events if e["ph"] == "X" and e["tid"] == tid]
        assert [s["name"] for s in spans] == [seg["state"] for seg in records["timeline"]]
        for span, seg in zip(spans, records["timeline"], strict=True):
            assert span["ts"] == _us(seg["start"])
            assert span["ts"] + span["dur"] == _us(seg["end"])
            assert span["args"]["first_step"] == seg["first_step"]
            assert span["args"]["last_step"] == seg["last_step"]
            assert span["args"].get("reason") == seg["reason"]
        instants = [e for e in events if e["ph"] == "i" and e["tid"] == tid]
        preempted = [e for e in instants if e["name"] == "preempted"]
        assert all(e["args"].pop("request_id") == view.request_id for e in preempted)
        assert [e["args"] for e in preempted] == records["preemptions"]
        assert len(preempted) == view.num_preemptions
        if view.num_preemptions:
            assert "preempted" in [s["name"] for s in spans]
    _check_counters(events, snapshots)


def _check_counters(events: list[dict[str, Any]], snapshots: Sequence[StepSnapshot]) -> None:
    """One KV/running/waiting sample per step at the step's end, with its figures; the
    step's tokens from its start."""
    firsts: dict[int, StepSnapshot] = {}
    for snapshot in snapshots:
        if snapshot.step > 0:
            firsts.setdefault(snapshot.step, snapshot)
    steps = list(firsts.values())
    counters: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        if event["ph"] == "C":
            counters[event["name"]].append(event)
    assert len(counters["KV cache"]) == len(counters["running"]) == len(steps)
    for snapshot, kv, running, waiting in zip(
        steps, counters["KV cache"], counters["running"], counters["waiting"], strict=True
    ):
        c = snapshot.counters
        assert kv["ts"] == running["ts"] == waiting["ts"] == _us(snapshot.clock)
        assert kv["args"]["usage %"] == pytest.approx(c.kv_cache_usage * 100, abs=0.006)
        assert running["args"]["requests"] == c.running
        assert waiting["args"]["requests"] == c.waiting
    busy = [e for e in counters["tokens per step"] if e["args"]["prefill"] or e["args"]["decode"]]
    worked = [s for s in steps if s.counters.prompt_tokens or s.counters.generation_tokens]
    assert len(busy) == len(worked)
    for event, snapshot in zip(busy, worked, strict=True):
        assert event["args"]["prefill"] == snapshot.counters.prompt_tokens
        assert event["args"]["decode"] == snapshot.counters.generation_tokens
        assert event["ts"] <= _us(snapshot.clock)
    final = counters["tokens per step"][-1]
    assert final["args"] == {"prefill": 0, "decode": 0}  # no work after the last step
