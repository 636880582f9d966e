"""Timelines from hand-built snapshots: segments, reasons, tokens, preemptions."""

from __future__ import annotations

import itertools

from stepview.insight.timeline import TimelineTracker, computed_tokens, timeline_of
from tests.insight.build import S, snap, view


def _history() -> list:  # type: ignore[type-arg]
    """One request through waiting (three reasons), chunked prefill, decode, a preemption,
    a re-prefill within one step and its finish; ``b`` alongside, never changing."""
    b = view("b", S.WAITING, arrival=0.1)
    a0 = view("a", S.PENDING, arrival=0.5)
    a1 = view("a", S.WAITING, arrival=0.5, reason="token_budget")
    a2 = view("a", S.WAITING, arrival=0.5, reason="kv_cache")
    a3 = view("a", S.PREFILLING, arrival=0.5, scheduled=4.0, computed=60)
    a4 = view("a", S.DECODING, arrival=0.5, scheduled=4.0, first_token=5.0, computed=100, out=1)
    a5 = a4._replace(completions=view("a", S.DECODING, out=2).completions)
    a6 = a4._replace(completions=view("a", S.DECODING, out=3).completions)
    a7 = a6._replace(
        state=S.PREEMPTED,
        computed_prompt_tokens=0,
        num_preemptions=1,
        wait_reason=view("a", S.WAITING, reason="kv_cache").wait_reason,
    )
    a9 = a4._replace(num_preemptions=1, completions=view("a", S.DECODING, out=4).completions)
    a10 = a9._replace(
        state=S.FINISHED,
        timings=a9.timings._replace(finished=11.0),
        completions=view("a", S.DECODING, out=5).completions,
    )
    t = 0.5
    return [
        snap(0, 1.0, [b, a0]),
        snap(1, 2.0, [b, a1], step_time=t),
        snap(2, 3.0, [b, a2], step_time=t),
        snap(3, 4.0, [b, a3], step_time=t),
        snap(4, 5.0, [b, a4], step_time=t),
        snap(5, 6.0, [b, a5], step_time=t),
        snap(6, 7.0, [b, a6], step_time=t, kv=0.9),
        snap(7, 8.0, [b, a7], step_time=t, kv=0.5),
        snap(8, 9.0, [b, a7], step_time=t, kv=0.5),
        snap(9, 10.0, [b, a9], step_time=t),
        snap(10, 11.0, [b], [a10], step_time=t),
    ]


def _segments(records: dict) -> list[tuple]:  # type: ignore[type-arg]
    return [
        (s["state"], s["first_step"], s["last_step"], s["start"], s["end"], s["reason"])
        for s in records["timeline"]
    ]


def test_segments_follow_state_and_reason() -> None:
    tracker = TimelineTracker()
    for snapshot in _history():
        tracker.observe(snapshot)
    records = tracker.records("a")
    assert _segments(records) == [
        ("waiting", 0, 0, 0.5, 1.5, None),
        ("waiting", 1, 1, 1.5, 2.5, "token_budget"),
        # Its wait ends when its timings say it was scheduled (here, with no vLLM times,
        # the end of step 3), its decode starts at its first token (the end of step 4):
        # the detail view shows the timings beside these segments.
        ("waiting", 2, 2, 2.5, 4.0, "kv_cache"),
        # The step that computed the rest of the prompt is prefill, though it came out decoding.
        ("prefill", 3, 4, 4.0, 5.0, None),
        ("decode", 5, 6, 5.0, 7.5, None),
        ("preempted", 7, 8, 7.5, 9.5, "kv_cache"),
        # Scheduled again: the prompt is computed again in one step.
        ("prefill", 9, 9, 9.5, 10.5, None),
        ("decode", 10, 10, 10.5, 11.0, None),
    ]
    timeline = records["timeline"]
    assert [s.get("tokens_prefilled") for s in timeline if s["state"] == "prefill"] == [100, 100]
    assert [s.get("tokens_generated") for s in timeline if s["state"] == "decode"] == [2, 1]
    assert timeline[5]["tokens_lost"] == 102  # prompt + the 2 output tokens fed back
    assert records["preemptions"] == [
        {"step": 7, "computed_tokens_lost": 102, "kv_usage_before": 0.9, "kv_usage_after": 0.5}
    ]
    got = tracker.get("a")
    assert got is not None and got.done and got.restarts == 1 and got.tokens_lost == 102
    # Segments tile the request's life: each starts where the one before ended.
    assert all(x["end"] == y["start"] for x, y in itertools.pairwise(timeline))


def test_open_segment_lasts_until_the_latest_snapshot() -> None:
    tracker = TimelineTracker()
    for snapshot in _history()[:3]:
        tracker.observe(snapshot)
    waiting = tracker.records("b")["timeline"]
    assert len(waiting) == 1
    assert (waiting[0]["first_step"], waiting[0]["last_step"]) == (0, 2)
    assert (waiting[0]["start"], waiting[0]["end"]) == (0.1, 3.0)
    assert tracker.records("nobody") == {"timeline": [], "preemptions": []}


def test_only_changed_views_are_looked_at() -> None:
    tracker = TimelineTracker()
    history = _history()
    changed = [[t.request_id for t in tracker.observe(s)] for s in history]
    assert changed[0] == ["b", "a"]
    assert changed[8] == []  # the same view objects as the step before
    assert changed[10] == ["a"]


def test_timeline_of_a_history_matches_the_live_tracker() -> None:
    history = _history()
    tracker = TimelineTracker()
    for snapshot in history:
        tracker.observe(snapshot)
    alone = timeline_of(history, "a")
    assert alone is not None
    assert alone.records(10, 11.0) == tracker.records("a")
    assert timeline_of(history, "missing") is None


def test_preempted_and_rescheduled_in_one_step_still_shows_the_eviction() -> None:
    d1 = view("x", S.DECODING, computed=10, out=4, scheduled=1.0)
    d2 = d1._replace(num_preemptions=1, completions=view("x", S.DECODING, out=5).completions)
    tracker = TimelineTracker()
    tracker.observe(snap(1, 1.0, [d1], step_time=0.5))
    tracker.observe(snap(2, 2.0, [d2], step_time=0.5, kv=1.0))
    states = [s["state"] for s in tracker.records("x")["timeline"]]
    # First seen having computed its prompt (prefill), then evicted and computed again.
    assert states[-3:] == ["prefill", "preempted", "prefill"]
    assert tracker.records("x")["preemptions"][0]["computed_tokens_lost"] == 13


def test_a_request_first_seen_finished_still_shows_its_decode() -> None:
    """A watch far behind reads many steps as one: a request can be seen first when it has
    already finished, 300 tokens out. Every token after the prefill's first was decoded."""
    done = view("x", S.FINISHED, arrival=0.5, finished=2.5, prompt=8, computed=8, out=300)
    tracker = TimelineTracker()
    tracker.observe(snap(1, 1.0, [view("y", S.WAITING)], step_time=0.5))
    tracker.observe(snap(2, 3.0, [view("y", S.WAITING)], [done], step_time=0.5))
    segments = tracker.records("x")["timeline"]
    assert [s["state"] for s in segments] == ["waiting", "prefill", "decode"]
    assert segments[1]["tokens_prefilled"] == 8 and segments[2]["tokens_generated"] == 299


def test_computed_tokens_counts_fed_back_outputs_while_decoding() -> None:
    assert computed_tokens(view("a", S.DECODING, computed=100, out=3)) == 102
    assert computed_tokens(view("a", S.PREFILLING, computed=40)) == 40


def test_a_rejected_duplicate_id_leaves_the_live_request_alone() -> None:
    live = view("a", S.WAITING, arrival=1.0)
    duplicate = view("a", S.REJECTED, arrival=2.0)
    tracker = TimelineTracker()
    tracker.observe(snap(1, 1.5, [live]))
    tracker.observe(snap(1, 2.5, [live], [duplicate]))
    timeline = tracker.get("a")
    assert timeline is not None and not timeline.done and timeline.view is live


def test_a_request_that_arrived_during_the_step_before_waits_from_its_arrival() -> None:
    """A step's work is taken to start its step time before its snapshot: for a watched
    server, the time since its record before. A request that arrived in between (vLLM runs a
    step, it comes, the next step schedules it) is first seen prefilled; its prefill must not
    start before it arrived, and its wait must end at vLLM's scheduled time, as its timings
    say. A real run under load started t1's prefill 12.5 ms (one step) before vLLM's time."""
    arrived, scheduled, first = 1.003, 1.0131, 1.0256  # (vLLM's, on the driver's clock)
    seen = view("t1", S.DECODING, arrival=arrived, scheduled=1.0135, prompt=11, computed=11)
    token = view("t1", S.DECODING, arrival=arrived, prompt=11, computed=11, out=1)
    token = token._replace(timings=token.timings._replace(scheduled=scheduled, first_token=first))
    tracker = TimelineTracker()
    tracker.observe(snap(3, 1.000, [view("t0", S.DECODING, computed=11)], step_time=0.0002))
    tracker.observe(snap(4, 1.0145, [seen], step_time=0.0125))  # the step began at 1.002
    tracker.observe(snap(5, 1.027, [token], step_time=0.0125))
    segments = tracker.records("t1")["timeline"]
    assert [s["state"] for s in segments] == ["waiting", "prefill", "decode"]
    assert segments[0]["start"] == arrived  # nothing of it before it arrived
    assert segments[1]["start"] == scheduled and segments[2]["start"] == first
