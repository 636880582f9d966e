"""Waiting requests without a reason of their own: their timelines, as if told every step.

The driver gives a waiting request no reason of its own when it waits for what its whole queue
shares (the snapshot's ``queue_reasons``), so a step costs nothing for it; its timeline is then
split by the runs of its queue's reason (``insight.segments.QueueRuns``). Here a real run of
the fake engine (vLLM's policy in miniature, queues, KV cache pressure, preemptions) is read
twice: as recorded, and with every waiting request's reason written into its view, as the
tracker read snapshots before queue reasons existed. Both must give the same timelines.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from stepview.engine.driver.loop import Driver
from stepview.insight.timeline import TimelineTracker
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestView, StepSnapshot
from stepview.testing.fake_engine import FakeEngine
from tests.helpers import all_done, wait_for

COUNT = 12


# (max_num_seqs, max_num_batched_tokens, KV blocks of 16 tokens, samples per request)
SETTINGS = [(4, 64, 8, 1), (2, 32, 6, 1), (6, 128, 10, 2)]


def _run(
    seqs: int = 4, budget: int = 64, blocks: int = 8, n: int = 1
) -> tuple[Driver, list[StepSnapshot]]:
    engine = FakeEngine(max_num_seqs=seqs, max_num_batched_tokens=budget, num_kv_blocks=blocks)
    driver = Driver(lambda _phase: engine, history_size=100_000)
    driver.start()
    try:
        for i in range(COUNT):
            spec = SamplingSpec(temperature=0.0 if n == 1 else 0.8, max_tokens=30, n=n, seed=i)
            driver.send(AddRequest(f"r{i}", "x" * (20 + 3 * i), spec))
        wait_for(driver, lambda s: len(s.finished) == COUNT and all_done(s), timeout=60)
    finally:
        driver.stop()
    return driver, list(driver.history())


def _told_every_step(history: list[StepSnapshot]) -> list[StepSnapshot]:
    """The snapshots with each waiting request's reason in its own view, no queue reasons;
    a view that did not change is the same object as before, as the driver makes them."""
    kept: dict[str, tuple[RequestView, object, RequestView]] = {}
    told = []
    for snapshot in history:
        active = []
        for view in snapshot.active:
            reason = snapshot.reason_of(view)
            before = kept.get(view.request_id)
            if before is not None and before[0] is view and before[1] == reason:
                active.append(before[2])
                continue
            resolved = view._replace(wait_reason=reason)
            kept[view.request_id] = (view, reason, resolved)
            active.append(resolved)
        told.append(replace(snapshot, active=tuple(active), queue_reasons=()))
    return told


@pytest.mark.parametrize("settings", SETTINGS, ids=[str(s) for s in SETTINGS])
def test_queue_segments_split_into_what_telling_every_step_gave(
    settings: tuple[int, int, int, int],
) -> None:
    driver, history = _run(*settings)
    assert any(s.queue_reasons and s.queue_reasons[0] is not None for s in history)
    assert any(v.wait_reason is None and s.reason_of(v) for s in history for v in s.active)
    old = TimelineTracker()
    for snapshot in _told_every_step(history):
        old.observe(snapshot)
    preempted = 0
    for i in range(COUNT):
        mine = driver.insight.request_fields(f"r{i}")
        theirs = old.records(f"r{i}")
        assert mine == theirs, f"r{i}"
        preempted += len(mine["preemptions"])
        reasons = {s["reason"] for s in mine["timeline"] if s["state"] == "waiting"}
        assert reasons, f"r{i} never waited"
    assert preempted > 0  # the run had the hard cases too
    reasons = {
        s["reason"]
        for i in range(COUNT)
        for s in driver.insight.request_fields(f"r{i}")["timeline"]
    }
    assert {"behind", "kv_cache"} <= reasons
