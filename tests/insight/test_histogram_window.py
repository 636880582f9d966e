"""The histogram-window arithmetic: increases between readings, resets, gaps, quantiles."""

from __future__ import annotations

import math

import pytest

from stepview.insight.histogram_window import (
    CounterWindow,
    Histogram,
    HistogramWindow,
    counter_increase,
    histogram_increase,
    quantile,
)

INF = math.inf
BOUNDS = (0.01, 0.1, 1.0, INF)


def hist(*counts: float, total: float = 0.0) -> Histogram:
    return Histogram(BOUNDS, tuple(counts), total)


def test_quantile_interpolates_inside_the_bucket_as_prometheus_does() -> None:
    # 10 observations: 2 up to 10 ms, 8 between 10 and 100 ms.
    h = hist(2, 10, 10, 10)
    assert quantile(0.1, h) == pytest.approx(0.005)  # rank 1 of 2 in [0, 0.01]
    assert quantile(0.5, h) == pytest.approx(0.01 + 0.09 * 3 / 8)
    assert quantile(1.0, h) == pytest.approx(0.1)


def test_a_rank_in_the_inf_bucket_answers_the_highest_finite_bound() -> None:
    assert quantile(0.99, hist(0, 0, 1, 10)) == 1.0


def test_no_observation_has_no_quantile() -> None:
    assert quantile(0.5, hist(0, 0, 0, 0)) is None
    assert quantile(0.5, None) is None


def test_histogram_increase_is_bucket_by_bucket() -> None:
    assert histogram_increase(hist(1, 2, 3, 3, total=1.0), hist(1, 4, 6, 7, total=3.5)) == hist(
        0, 2, 3, 4, total=2.5
    )


def test_a_count_that_falls_is_a_restart_and_counts_whole() -> None:
    after_restart = hist(0, 1, 1, 1, total=0.05)
    assert histogram_increase(hist(5, 9, 9, 9, total=2.0), after_restart) == after_restart
    assert counter_increase(120.0, 7.0) == 7.0
    assert counter_increase(120.0, 127.0) == 7.0
    other_bounds = Histogram((0.5, INF), (1, 1), 0.2)
    assert histogram_increase(hist(0, 0, 0, 0), other_bounds) == other_bounds


def test_the_window_holds_only_what_happened_within_its_span() -> None:
    window = HistogramWindow(span=10.0)
    window.add(0.0, hist(100, 100, 100, 100))  # before the watch: the baseline only
    assert window.observed() is None
    window.add(1.0, hist(100, 102, 102, 102))  # 2 at 10-100 ms
    window.add(6.0, hist(100, 102, 105, 105))  # 3 at 0.1-1 s
    assert window.observed() == hist(0, 2, 5, 5)
    window.add(12.0, hist(100, 102, 105, 105))  # the first increase is now 11 s old
    assert window.observed() == hist(0, 0, 3, 3)
    window.add(17.0, hist(100, 102, 105, 105))
    assert window.quantiles([0.5, 0.99]) == (None, None)  # an empty window


def test_a_restart_inside_the_window_keeps_what_came_before_and_after() -> None:
    window = HistogramWindow(span=60.0)
    window.add(0.0, hist(0, 5, 5, 5))
    window.add(1.0, hist(0, 8, 8, 8))  # +3 at 10-100 ms
    window.add(2.0, None)  # the server is down
    window.add(3.0, hist(1, 1, 1, 1))  # back, restarted: 1 new observation under 10 ms
    assert window.observed() == hist(1, 4, 4, 4)
    assert window.quantiles([0.0])[0] == pytest.approx(0.0)


def test_a_metric_the_server_lacks_stays_empty() -> None:
    window = HistogramWindow(span=60.0)
    counter = CounterWindow(span=60.0)
    for at in range(5):
        window.add(float(at), None)
        assert counter.add(float(at), None) == 0.0
    assert window.observed() is None and window.quantiles([0.5]) == (None,)
    assert counter.increase() == 0.0


def test_counter_window_steps_and_restart() -> None:
    counter = CounterWindow(span=5.0)
    assert counter.add(0.0, 40.0) == 0.0  # the baseline
    assert counter.add(1.0, 43.0) == 3.0
    assert counter.add(2.0, 2.0) == 2.0  # restarted
    assert counter.increase() == 5.0
    counter.add(6.5, 2.0)  # the increase at 1.0 is older than the span
    assert counter.increase() == 2.0
