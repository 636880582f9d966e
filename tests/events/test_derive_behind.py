"""A watch that reads many steps as one: its events still tell the results file's reasons.

A watch that falls behind its server (niced, on a busy machine) catches up with a full record
and the log of ends, so one snapshot can hold what several steps did: a request seen waiting
is next seen finished, in the same snapshot where its queue's reason changed. The event
stream and the timelines (the results file's) are derived apart; here one fake run's
snapshots are read with steps skipped, as such a watch reads them, and both must tell every
request's wait reasons alike.
"""

from __future__ import annotations

import pytest

from stepview.engine.driver.loop import Driver
from stepview.events.derive import EventDeriver, events_of
from stepview.insight.timeline import TimelineTracker
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import StepSnapshot
from stepview.testing.fake_engine import FakeEngine
from tests.events.checks import reasons_by_request, reasons_of_result
from tests.helpers import all_done, wait_for

COUNT = 16


@pytest.fixture(scope="module")
def history() -> list[StepSnapshot]:
    """Every snapshot of a run where requests wait for a full batch and a small KV cache."""
    engine = FakeEngine(max_num_seqs=4, max_num_batched_tokens=64, num_kv_blocks=8)
    driver = Driver(lambda _phase: engine, history_size=100_000)
    driver.start()
    try:
        for i in range(COUNT):
            spec = SamplingSpec(temperature=0.0, max_tokens=4 + i % 3)
            driver.send(AddRequest(f"r{i}", "x" * (20 + 3 * i), spec))
        wait_for(driver, lambda s: len(s.finished) == COUNT and all_done(s), timeout=60)
    finally:
        driver.stop()
    return list(driver.history())


@pytest.mark.parametrize("stride", range(1, 13))
def test_events_and_timelines_tell_the_same_reasons_with_steps_skipped(
    history: list[StepSnapshot], stride: int
) -> None:
    seen = history[::stride]
    if seen[-1] is not history[-1]:
        seen.append(history[-1])
    events = list(events_of(seen, EventDeriver(step_every=0.0, wall=lambda s: s.clock)))
    tracker = TimelineTracker()
    for snapshot in seen:
        tracker.observe(snapshot)
    said = reasons_by_request(events)
    assert {"behind", "kv_cache"} <= {code for codes in said.values() for code in codes}
    for i in range(COUNT):
        told = reasons_of_result(tracker.records(f"r{i}"))
        assert said.get(f"r{i}", []) == told, f"r{i}"
