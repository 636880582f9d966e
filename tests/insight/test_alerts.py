"""The thrash detector and the stall watchdogs on hand-built snapshots."""

from __future__ import annotations

from stepview.insight.alerts import Thresholds
from stepview.insight.run import RunInsight
from stepview.model.alerts import KV_FULL, STALL, STUCK, THRASH
from tests.insight.build import S, snap, view


def test_thrash_after_three_preemptions_until_it_finishes() -> None:
    insight = RunInsight()
    step = 0
    alerts: tuple = ()  # type: ignore[type-arg]
    for n in range(1, 4):
        step += 1
        running = view("t", S.DECODING, computed=50, out=n, preemptions=n - 1)
        alerts = insight.observe(snap(step, float(step), [running], step_time=0.1))
        assert not alerts
        step += 1
        evicted = view("t", S.PREEMPTED, computed=0, out=n, preemptions=n)
        alerts = insight.observe(snap(step, float(step), [evicted], step_time=0.1))
    assert [(a.kind, a.request_id, a.step) for a in alerts] == [(THRASH, "t", 6)]
    assert "preempted 3 times" in alerts[0].text
    same = insight.observe(snap(7, 7.0, [evicted], step_time=0.1))
    assert same is alerts  # unchanged: the very same tuple
    done = evicted._replace(state=S.FINISHED)
    assert insight.observe(snap(8, 8.0, [], [done], step_time=0.1)) == ()
    assert [a.kind for a in insight.watchdogs.raised] == [THRASH]
    assert insight.summary()["alerts"][0]["request_id"] == "t"


def test_thrash_when_prefill_restarts_without_a_recorded_preemption() -> None:
    insight = RunInsight()
    alerts: tuple = ()  # type: ignore[type-arg]
    for i in range(4):
        grown = view("r", S.PREFILLING, computed=60)
        lost = view("r", S.PREFILLING, computed=0, prompt=101 + i)
        insight.observe(snap(2 * i + 1, 2.0 * i + 1, [grown], step_time=0.1))
        alerts = insight.observe(snap(2 * i + 2, 2.0 * i + 2, [lost], step_time=0.1))
    assert alerts and alerts[0].kind == THRASH and "prefill restarted 3 times" in alerts[0].text


def test_stall_when_requests_wait_and_nothing_is_scheduled() -> None:
    insight = RunInsight(Thresholds(stall_steps=3))
    waiting = [view("w", S.WAITING)]
    assert insight.observe(snap(1, 1.0, waiting, waiting=1)) == ()
    assert insight.observe(snap(2, 2.0, waiting, waiting=1)) == ()
    assert insight.observe(snap(2, 2.5, waiting, waiting=1)) == ()  # no step: not counted
    stalled = insight.observe(snap(3, 3.0, waiting, waiting=1))
    assert [(a.kind, a.step) for a in stalled] == [(STALL, 3)]
    assert "nothing scheduled for 3 steps" in stalled[0].text
    assert insight.observe(snap(4, 4.0, waiting, waiting=1)) is stalled
    moving = insight.observe(snap(5, 5.0, waiting, waiting=1, prompt_tokens=8))
    assert moving == ()


def test_kv_full_without_progress() -> None:
    insight = RunInsight(Thresholds(stall_steps=2, kv_full=0.95))
    busy = [view("k", S.PREFILLING, computed=10)]
    insight.observe(snap(1, 1.0, busy, kv=0.97, prompt_tokens=5, total_generated=4))
    insight.observe(snap(2, 2.0, busy, kv=0.97, prompt_tokens=5, total_generated=4))
    full = insight.observe(snap(3, 3.0, busy, kv=0.99, prompt_tokens=5, total_generated=4))
    assert [a.kind for a in full] == [KV_FULL]
    assert insight.observe(snap(4, 4.0, busy, kv=0.99, total_generated=5)) == ()


def test_stuck_when_the_oldest_request_waits_past_the_limit() -> None:
    insight = RunInsight(Thresholds(stuck_after=30.0))
    running = view("run", S.DECODING, arrival=0.0, computed=100, out=3)
    old = view("old", S.WAITING, arrival=1.0, reason="kv_cache")
    young = view("young", S.WAITING, arrival=20.0)
    queue = [running, old, young]
    assert insight.observe(snap(1, 30.0, queue, waiting=2, prompt_tokens=1)) == ()
    stuck = insight.observe(snap(2, 31.5, queue, waiting=2, prompt_tokens=1))
    assert [(a.kind, a.request_id, a.step) for a in stuck] == [(STUCK, "old", 2)]
    assert stuck[0].text == "old stuck: waiting for 30 s (kv_cache)"
    assert insight.observe(snap(3, 40.0, queue, waiting=2, prompt_tokens=1)) is stuck
    # "old" is scheduled at last; "young" has not waited 30 s yet: nothing is stuck.
    moved = [running, old._replace(state=S.PREFILLING), young]
    assert insight.observe(snap(4, 45.0, moved, waiting=1, prompt_tokens=1)) == ()
    # ... until it has: a new alert, about it.
    later = insight.observe(snap(5, 51.0, moved, waiting=1, prompt_tokens=1))
    assert [(a.kind, a.request_id) for a in later] == [(STUCK, "young")]
    assert [a.request_id for a in insight.watchdogs.raised] == ["old", "young"]


def test_stuck_without_a_step_when_the_server_goes_quiet() -> None:
    """A hung server sends no record: the driver's quiet snapshots (same step, later clock)
    are enough for the stuck watchdog; the step-counting ones do not count them."""
    insight = RunInsight(Thresholds(stuck_after=30.0, stall_steps=2))
    queue = [view("w", S.WAITING, arrival=0.0)]
    assert insight.observe(snap(1, 10.0, queue, waiting=1)) == ()
    assert insight.observe(snap(1, 20.0, queue, waiting=1)) == ()
    stuck = insight.observe(snap(1, 31.0, queue, waiting=1))
    assert [(a.kind, a.request_id, a.step) for a in stuck] == [(STUCK, "w", 1)]


def test_no_stuck_alert_without_a_limit() -> None:
    insight = RunInsight()
    waiting = [view("w", S.WAITING, arrival=0.0)]
    assert insight.observe(snap(1, 10_000.0, waiting, waiting=1, prompt_tokens=1)) == ()
