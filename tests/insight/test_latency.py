"""Latency figures: per-request spans, percentiles, the recent window, histograms."""

from __future__ import annotations

import pytest

from stepview.insight.percentiles import LatencyStats, distribution, histogram, percentile
from stepview.model.latency import request_latency
from tests.insight.build import S, view


def _done(rid: str, e2e: float, *, out: int = 5, state: S = S.FINISHED) -> object:
    return view(rid, state, arrival=0.0, scheduled=0.1, first_token=0.2, finished=e2e, out=out)


def test_request_latency_spans() -> None:
    lat = request_latency(_done("a", 1.0, out=5))  # type: ignore[arg-type]
    assert lat.queue == pytest.approx(0.1)
    assert lat.ttft == pytest.approx(0.2)
    assert lat.itl == pytest.approx(0.8 / 4)
    assert lat.e2e == pytest.approx(1.0)
    assert lat.decode_rate == pytest.approx(4 / 0.8)
    one = request_latency(_done("b", 1.0, out=1))  # type: ignore[arg-type]
    assert one.itl is None


def test_percentiles_interpolate_like_numpy() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.5) == 3.0
    assert percentile([float(i) for i in range(11)], 0.9) == pytest.approx(9.0)
    assert percentile([0.0, 10.0], 0.99) == pytest.approx(9.9)
    assert percentile([7.0], 0.99) == 7.0
    d = distribution([3.0, 1.0, 2.0])
    assert d == {
        "count": 3,
        "p50": 2.0,
        "p90": 2.8,
        "p99": pytest.approx(2.98),
        "max": 3.0,
        "mean": 2.0,
    }
    assert distribution([]) is None


def test_histogram_bins() -> None:
    h = histogram([0.0, 1.0, 2.0, 10.0], bins=5)
    assert h["edges"] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert h["counts"] == [2, 1, 0, 0, 1]
    assert histogram([3.0, 3.0], bins=2)["counts"] == [2, 0]
    assert histogram([]) == {"edges": [], "counts": []}


def test_only_finished_requests_count_and_the_window_keeps_the_latest() -> None:
    views = [_done(f"r{i}", float(i + 1)) for i in range(10)]
    views.append(_done("gone", 99.0, state=S.ABORTED))
    stats = LatencyStats.of(views, window=3)  # type: ignore[arg-type]
    summary = stats.summary(bins=4)
    assert summary["finished"] == 10
    assert summary["all"]["e2e"]["max"] == 10.0
    assert summary["recent"]["e2e"]["count"] == 3
    assert summary["recent"]["e2e"]["p50"] == 9.0
    assert sum(summary["histograms"]["e2e"]["counts"]) == 10
