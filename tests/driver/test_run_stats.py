"""The run summary: what the driver logs at shutdown and the benchmarks read back."""

from __future__ import annotations

from stepview.engine.driver import Driver, RunStats
from stepview.engine.fake_engine import FakeEngine
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from tests.helpers import all_done, wait_for


def test_summary_line_parses_back() -> None:
    stats = RunStats(192, 64, 5120, 2.25, 2.301234, 14.5, busy_cpu=2.1)
    line = f"2026-01-01 12:00:00,000 INFO stepview.engine.driver: {stats.summary()}"
    parsed = RunStats.parse(f"earlier line\n{line}\nlater line\n")
    assert parsed is not None
    assert (parsed.steps, parsed.requests_done, parsed.tokens_generated) == (192, 64, 5120)
    assert abs(parsed.busy_span - 2.301234) < 1e-6
    assert abs(parsed.stepping_time - 2.25) < 1e-3
    assert abs(parsed.busy_cpu - 2.1) < 1e-6
    assert RunStats.parse("no summary here") is None


def test_busy_span_covers_the_steps_only() -> None:
    engine = FakeEngine(step_delay=0.002)
    driver = Driver(lambda phase: engine)
    for i in range(3):
        driver.send(AddRequest(f"r{i}", "hello there", SamplingSpec(max_tokens=4)))
    driver.start()
    wait_for(driver, lambda s: len(s.finished) == 3 and all_done(s))
    driver.stop()
    stats = driver.run_stats
    assert stats.steps > 0 and stats.requests_done == 3
    # Every step() is inside the span; start-up and the idle wait before stop() are not.
    assert stats.stepping_time <= stats.busy_span + 1e-9
    assert stats.busy_cpu > 0
    assert stats.busy_span < stats.since_start
