"""Waiting stretches: consecutive waiting segments as one, with the steps per reason."""

from __future__ import annotations

from stepview.insight.segments import DECODE, PREEMPTED, PREFILL, WAITING, Segment
from stepview.insight.stretches import breakdown, duration_text, label, stretches
from stepview.insight.timeline import TimelineTracker
from tests.insight.build import S, snap, view


def _seg(state: str, first: int, last: int, reason: str | None = None) -> Segment:
    """A segment whose times are its steps' (step n from n/100 s to (n+1)/100 s)."""
    return Segment(state, first, last, first / 100, (last + 1) / 100, reason)


def _shape(segments: list[Segment]) -> list[tuple[str, int, int, int]]:
    return [(s.state, s.first_step, s.last_step, len(s.segments)) for s in stretches(segments)]


def test_reasons_flipping_every_step_are_one_stretch_with_the_steps_counted() -> None:
    waits = [_seg(WAITING, 17, 18, "token_budget")]
    for step in range(19, 118):  # behind, kv_cache, behind, ... one step each
        waits.append(_seg(WAITING, step, step, "behind" if step % 2 else "kv_cache"))
    segments = [*waits, _seg(PREFILL, 118, 119), _seg(DECODE, 120, 130)]
    assert _shape(segments) == [
        (WAITING, 17, 117, 100),
        (PREFILL, 118, 119, 1),
        (DECODE, 120, 130, 1),
    ]
    stretch = stretches(segments)[0]
    assert stretch.reasons == [("behind", 50), ("kv_cache", 49), ("token_budget", 2)]
    assert stretch.start == 0.17 and stretch.end == 1.18
    assert label(stretch) == (
        "waiting 1.01 s, steps 17-117: behind 50 steps, kv_cache 49, token_budget 2"
    )
    assert breakdown(stretch, compact=True) == "behind 50, kv_cache 49, token_budget 2"


def test_a_preemption_is_a_stretch_of_its_own_between_two_waits() -> None:
    segments = [
        _seg(WAITING, 0, 2, "behind"),
        _seg(WAITING, 3, 3, "kv_cache"),
        _seg(PREFILL, 4, 5),
        _seg(PREEMPTED, 6, 7, "kv_cache"),
        _seg(PREEMPTED, 8, 8, "behind"),  # one eviction whose reason changed
        _seg(WAITING, 9, 9, "behind"),
        _seg(WAITING, 10, 11, "kv_cache"),
    ]
    assert _shape(segments) == [
        (WAITING, 0, 3, 2),
        (PREFILL, 4, 5, 1),
        (PREEMPTED, 6, 8, 2),
        (WAITING, 9, 11, 2),
    ]
    assert [s.first for s in stretches(segments)] == [0, 2, 3, 5]
    assert breakdown(stretches(segments)[-1]) == "kv_cache 2 steps, behind 1"  # ties: first seen


def test_other_phases_never_merge_and_one_segment_is_one_stretch() -> None:
    segments = [_seg(PREFILL, 0, 0), _seg(PREFILL, 1, 1), _seg(WAITING, 2, 2)]
    assert _shape(segments) == [(PREFILL, 0, 0, 1), (PREFILL, 1, 1, 1), (WAITING, 2, 2, 1)]
    assert label(stretches(segments)[2]) == "waiting 10.0 ms, step 2: queued 1 step"
    assert stretches([]) == []


def test_the_tracker_s_flipping_segments_add_up_to_the_stretch_s_steps() -> None:
    """From snapshots: a reason that changes every step, then the request is scheduled."""
    tracker = TimelineTracker()
    history = [snap(0, 0.0, [view("a", S.WAITING)])]
    for step in range(1, 13):
        reason = ("behind", "kv_cache", "behind", "token_budget")[step % 4]
        history.append(snap(step, step / 10, [view("a", S.WAITING, reason=reason)], step_time=0.1))
    history.append(snap(13, 1.3, [view("a", S.PREFILLING, computed=100)], step_time=0.1))
    for snapshot in history:
        tracker.observe(snapshot)
    timeline = tracker.get("a")
    assert timeline is not None
    assert len(timeline.segments) == 14  # the records keep every one
    waiting, prefill = stretches(timeline.segments)
    assert (waiting.first_step, waiting.last_step, prefill.state) == (0, 12, PREFILL)
    assert waiting.reasons == [("behind", 6), ("kv_cache", 3), ("token_budget", 3), ("queued", 1)]
    assert sum(n for _, n in waiting.reasons) == waiting.last_step - waiting.first_step + 1
    assert label(waiting).startswith("waiting 1.20 s, steps 0-12: behind 6 steps, kv_cache 3")


def test_durations_read_in_seconds_or_milliseconds() -> None:
    assert [duration_text(x) for x in (0.0042, 0.86, 12.345, 1234.0)] == [
        "4.2 ms",
        "0.86 s",
        "12.35 s",
        "1234 s",
    ]
