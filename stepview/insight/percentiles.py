"""Latency figures over finished requests: percentiles, a recent window, histogram bins.

Per request, the figures of :func:`stepview.model.latency.request_latency` (``queue``,
``ttft``, ``itl``, ``e2e``, ``decode_rate``; defined there, once, for the panes too): the
panel's "decode tok/s" of a request is the very figure its row in the Finished pane shows.
A rate is the one figure where more is better: its p90 and p99 are the fast end.

Only requests that ``FINISHED`` count (an abort or a rejection says nothing about latency).
Adding a request is O(1); the figures are sorted when asked for, which happens at the end of
a run or when a panel redraws, never per step.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, Final

from stepview.model.latency import RequestLatency, request_latency
from stepview.model.snapshot import RequestState, RequestView

# The fields of RequestLatency that have a distribution, in the order tables list them.
METRICS: Final = ("queue", "ttft", "itl", "e2e", "decode_rate")
METRIC_LABELS: Final = {
    "queue": "queue time (s)",
    "ttft": "TTFT (s)",
    "itl": "inter-token (s)",
    "e2e": "end-to-end (s)",
    "decode_rate": "decode tok/s",
}
QUANTILES: Final = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))
# Requests in the "recent" window.
RECENT_WINDOW: Final = 64
HISTOGRAM_BINS: Final = 10


def percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default) of a sorted sequence."""
    if not ordered:
        raise ValueError("no values")
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def distribution(values: Iterable[float]) -> dict[str, Any] | None:
    """``count``, ``p50``/``p90``/``p99``/``max`` and ``mean`` of the values; None if none."""
    ordered = sorted(values)
    if not ordered:
        return None
    out: dict[str, Any] = {"count": len(ordered)}
    for name, q in QUANTILES:
        out[name] = percentile(ordered, q)
    out["max"] = ordered[-1]
    out["mean"] = math.fsum(ordered) / len(ordered)
    return out


def histogram(values: Sequence[float], bins: int = HISTOGRAM_BINS) -> dict[str, list[Any]]:
    """``edges`` (bins + 1, equal width from the minimum to the maximum) and ``counts``."""
    if not values:
        return {"edges": [], "counts": []}
    low, high = min(values), max(values)
    width = (high - low) / bins or 1.0
    counts = [0] * bins
    for value in values:
        counts[min(bins - 1, int((value - low) / width))] += 1
    return {"edges": [low + i * width for i in range(bins + 1)], "counts": counts}


class LatencyStats:
    """Every finished request's :class:`RequestLatency`, and the last ``window`` of them."""

    def __init__(self, window: int = RECENT_WINDOW) -> None:
        self.all: list[RequestLatency] = []
        self.recent: deque[RequestLatency] = deque(maxlen=window)

    @classmethod
    def of(cls, views: Iterable[RequestView], window: int = RECENT_WINDOW) -> LatencyStats:
        """The figures of a list of requests (e.g. a snapshot's ``finished``): for a UI panel."""
        stats = cls(window)
        for view in views:
            stats.add(view)
        return stats

    def add(self, view: RequestView) -> None:
        if view.state is RequestState.FINISHED:
            latency = request_latency(view)
            self.all.append(latency)
            self.recent.append(latency)

    def summary(self, *, bins: int = HISTOGRAM_BINS) -> dict[str, Any]:
        """``{"finished": n, "all": {metric: distribution}, "recent": {...}, "histograms":
        {metric: {"edges", "counts"}}}``; a metric no request has is ``None``."""
        return {
            "finished": len(self.all),
            "window": self.recent.maxlen,
            "all": _distributions(self.all),
            "recent": _distributions(self.recent),
            "histograms": {
                metric: histogram(_values(self.all, metric), bins) for metric in METRICS
            },
        }


def _values(latencies: Iterable[RequestLatency], metric: str) -> list[float]:
    return [v for lat in latencies if (v := getattr(lat, metric)) is not None]


def _distributions(latencies: Iterable[RequestLatency]) -> dict[str, Any]:
    kept = list(latencies)
    return {metric: distribution(_values(kept, metric)) for metric in METRICS}
