"""Latency figures over finished requests: percentiles, a recent window, histogram bins.

Per request (from its :class:`~stepview.model.snapshot.Timings`, driver clock, seconds):

* ``queue`` — arrival to first scheduled;
* ``ttft`` — arrival to first token;
* ``itl`` — mean inter-token latency, first to last token over the tokens after the first
  (vLLM's ``mean_time_per_output_token``);
* ``e2e`` — arrival to finished;
* ``tps`` — output tokens per second while in the engine (scheduled to finished).

Only requests that ``FINISHED`` count (an abort or a rejection says nothing about latency).
Adding a request is O(1); the figures are sorted when asked for, which happens at the end of
a run or when a panel redraws, never per step.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

from stepview.model.snapshot import RequestState, RequestView

METRICS: Final = ("queue", "ttft", "itl", "e2e", "tps")
METRIC_LABELS: Final = {
    "queue": "queue time (s)",
    "ttft": "TTFT (s)",
    "itl": "inter-token (s)",
    "e2e": "end-to-end (s)",
    "tps": "output tok/s",
}
QUANTILES: Final = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))
# Requests in the "recent" window.
RECENT_WINDOW: Final = 64
HISTOGRAM_BINS: Final = 10


class RequestLatency(NamedTuple):
    """One finished request's figures; ``None`` where it has none (one token: no ``itl``)."""

    request_id: str
    queue: float | None
    ttft: float | None
    itl: float | None
    e2e: float | None
    tps: float | None


def _span(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else max(0.0, b - a)


def request_latency(view: RequestView) -> RequestLatency:
    t = view.timings
    tokens = view.output_tokens
    decode = _span(t.first_token, t.finished)
    in_engine = _span(t.scheduled, t.finished)
    return RequestLatency(
        view.request_id,
        _span(t.arrival, t.scheduled),
        _span(t.arrival, t.first_token),
        None if decode is None or tokens < 2 else decode / (tokens - 1),
        _span(t.arrival, t.finished),
        None if not in_engine else tokens / in_engine,
    )


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
