"""The run's totals: the line the driver logs at shutdown, and the data it hands to benchmarks."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepview.engine.driver.loop import Driver
from stepview.engine.driver.run_stats import RUN_STATS_ENV, RunStats, hand_over, load
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.testing.fake_engine import FakeEngine
from tests.helpers import all_done, wait_for


def test_summary_line_says_every_figure() -> None:
    stats = RunStats(192, 64, 5120, 2.25, 2.301234, 14.5, busy_cpu=2.1)
    assert stats.summary() == (
        "run summary: 192 steps, 64 requests done, 5120 tokens generated, 2.250 s in step(), "
        "14.500 s since start, 2.301234 s first to last step (2.100000 s CPU)"
    )


def test_handed_over_stats_load_back_exactly(tmp_path: Path) -> None:
    stats = RunStats(192, 64, 5120, 2.25, 2.301234567, 14.5, busy_cpu=2.1)
    target = tmp_path / "stats.json"
    hand_over(stats, {RUN_STATS_ENV: str(target)})
    assert load(target) == stats  # data, not a rounded log line


def test_nothing_is_handed_over_unless_asked(tmp_path: Path) -> None:
    hand_over(RunStats(1, 1, 1, 0.1, 0.1, 0.2), {})
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_target_does_not_raise(tmp_path: Path) -> None:
    hand_over(RunStats(1, 1, 1, 0.1, 0.1, 0.2), {RUN_STATS_ENV: str(tmp_path / "no" / "dir")})


def test_busy_span_covers_the_steps_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "stats.json"
    monkeypatch.setenv(RUN_STATS_ENV, str(target))
    engine = FakeEngine(step_delay=0.002)
    driver = Driver(lambda phase: engine)
    for i in range(3):
        driver.send(AddRequest(f"r{i}", "hello there", SamplingSpec(max_tokens=4)))
    driver.start()
    wait_for(driver, lambda s: len(s.finished) == 3 and all_done(s))
    driver.stop()
    stats = load(target)  # what the driver handed over as its thread ended
    assert stats.steps > 0 and stats.requests_done == 3
    assert stats.tokens_generated == 12
    # Every step() is inside the span; start-up and the idle wait before stop() are not.
    assert stats.stepping_time <= stats.busy_span + 1e-9
    assert stats.busy_cpu > 0
    assert stats.busy_span < stats.since_start
    assert stats.steps == driver.run_stats.steps
