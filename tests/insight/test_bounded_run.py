"""A long run's insight holds what is running, not everything it has seen.

The same run (real driver, fake engine with a KV cache small enough to preempt) is folded
into an insight that keeps every timeline and one that keeps the latest few finished: the
figures a user reads (latency, preemptions, tokens lost, alerts) must be the same, while the
bounded one holds a handful of timelines however many requests finished.
"""

from __future__ import annotations

from collections.abc import Sequence

from stepview.engine.driver.loop import Driver
from stepview.insight.alerts import RAISED_KEPT, Watchdogs
from stepview.insight.run import RunInsight
from stepview.model.alerts import THRASH, Alert
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestView, StepSnapshot
from stepview.testing.fake_engine import FakeEngine
from tests.helpers import all_done, wait_for

REQUESTS = 120
KEEP = 3


class Both:
    """A sink folding every snapshot into both insights, as the driver's sinks run."""

    def __init__(self) -> None:
        self.everything = RunInsight(keep_steps=True)
        self.bounded = RunInsight(keep_done=KEEP)
        self.most_done_held = 0  # timelines held beyond the snapshot's active requests

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        self.everything.observe(snapshot)
        self.bounded.observe(snapshot)
        held = sum(1 for _ in self.bounded.timelines)
        self.most_done_held = max(self.most_done_held, held - len(snapshot.active))

    def close(self) -> None:
        pass

    def error(self) -> str | None:
        return None


def test_bounded_insight_reports_the_same_run_holding_only_recent_timelines() -> None:
    both = Both()
    # 4 running of up to 12 blocks each in 20 blocks: the newest are preempted again and again.
    engine = FakeEngine(max_num_seqs=4, num_kv_blocks=20, block_size=4)
    driver = Driver(lambda phase: engine, sinks=(both,))
    driver.start()
    try:
        for i in range(REQUESTS):
            driver.send(AddRequest(f"r{i}", "a prompt of some length", SamplingSpec(max_tokens=40)))
        wait_for(driver, lambda s: s.finished.total == REQUESTS and all_done(s), timeout=60)
    finally:
        driver.stop()
    full, bounded = both.everything.summary(), both.bounded.summary()
    kept = list(both.everything.timelines)  # every request's timeline: the totals, walked
    assert full["preemptions"] == {
        "count": sum(len(t.preemptions) for t in kept),
        "requests": sum(1 for t in kept if t.preemptions),
        "tokens_lost": sum(t.tokens_lost for t in kept),
    }
    assert full["preemptions"]["count"] > full["preemptions"]["requests"] > 0  # some, twice
    assert bounded == full
    assert sum(1 for _ in both.everything.timelines) == REQUESTS
    assert both.most_done_held <= KEEP
    assert sum(1 for _ in both.bounded.timelines) <= KEEP


def test_raised_alerts_keep_the_latest_and_count_them_all() -> None:
    watchdogs = Watchdogs()
    for n in range(RAISED_KEPT + 50):
        watchdogs._raise(Alert(THRASH, n, float(n), f"request r{n} thrashes", f"r{n}"))
    assert watchdogs.raised_count == RAISED_KEPT + 50
    assert len(watchdogs.raised) == RAISED_KEPT
    assert watchdogs.raised[0].request_id == "r50"
