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


def test_past_the_exact_limit_percentiles_are_sketched_within_their_bound() -> None:
    import random

    from stepview.insight.percentiles import SKETCH_ACCURACY
    from stepview.insight.report import format_summary

    rng = random.Random(3)
    stats = LatencyStats(window=64, exact_limit=1_000)
    exact = LatencyStats(window=64, exact_limit=10**9)  # the same data, kept exactly
    for i in range(20_000):
        e2e = 0.2 + rng.lognormvariate(0.0, 1.0)  # latencies over orders of magnitude
        done = _done(f"r{i}", e2e, out=rng.randint(2, 300))
        stats.add(done)  # type: ignore[arg-type]
        exact.add(done)  # type: ignore[arg-type]
    assert stats.sketched and not exact.sketched
    assert len(stats.all) == 0 and len(exact.all) == 20_000  # memory: no list of every one
    ours, truth = stats.summary(), exact.summary()
    assert ours["finished"] == truth["finished"] == 20_000
    assert ours["sketched"]["relative_error"] == SKETCH_ACCURACY
    for metric in ("e2e", "itl", "decode_rate"):
        mine, real = ours["all"][metric], truth["all"][metric]
        assert mine["count"] == real["count"]
        assert mine["max"] == real["max"]
        assert mine["mean"] == pytest.approx(real["mean"], rel=1e-9)
        for q in ("p50", "p90", "p99"):
            # The sketch's guarantee (relative), plus one rank of slack for interpolation.
            assert mine[q] == pytest.approx(real[q], rel=2 * SKETCH_ACCURACY), (metric, q)
    assert ours["recent"] == truth["recent"]  # the recent window stays exact
    assert "DDSketch sketch, within ±1%" in format_summary(
        {"steps": 1, "latency": ours, "preemptions": {"count": 0, "requests": 0,
         "tokens_lost": 0}, "alerts": []}
    )  # fmt: skip
