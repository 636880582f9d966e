"""Latency figures over finished requests: percentiles, a recent window, histogram bins.

Per request, the figures of :func:`stepview.model.latency.request_latency` (``queue``,
``ttft``, ``itl``, ``e2e``, ``decode_rate``; defined there, once, for the panes too): the
panel's "decode tok/s" of a request is the very figure its row in the Finished pane shows.
A rate is the one figure where more is better: its p90 and p99 are the fast end.

Only requests that ``FINISHED`` count (an abort or a rejection says nothing about latency).
Adding a request is O(1); the figures are sorted when asked for, which happens at the end of
a run or when a panel redraws, never per step.

A run may finish millions of requests (a watch left running for weeks), so memory holds the
exact figures of the first :data:`EXACT_LIMIT` only; from then on the run-level percentiles
come from a streaming quantile sketch per metric, Datadog's DDSketch (the ``ddsketch``
package): its guarantee is a *relative* error (every quantile within ±:data:`SKETCH_ACCURACY`
of the true value's size, whatever the distribution, fitting latencies that span orders of
magnitude), it adds a value in about half a microsecond, merges, and is maintained by the
people who run it in production. t-digest's error is not bounded in the tails, and
HdrHistogram needs the range fixed up front. ``count``, ``max`` and ``mean`` stay exact, as do
the recent window's figures; :meth:`LatencyStats.summary` says which figures are sketched and
how precise they are, and so does every table made from it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, Final

from ddsketch import DDSketch

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
# Requests whose figures are kept exactly; past this many, the percentiles are sketched.
EXACT_LIMIT: Final = 10_000
# DDSketch's relative accuracy: a sketched quantile is within ±1 % of the true one.
SKETCH_ACCURACY: Final = 0.01


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


class _Sketched:
    """One metric's distribution past :data:`EXACT_LIMIT`: a DDSketch, the exact max and sum."""

    __slots__ = ("max", "sketch", "total")

    def __init__(self) -> None:
        self.sketch = DDSketch(relative_accuracy=SKETCH_ACCURACY)
        self.max = -math.inf
        self.total = 0.0

    def add(self, value: float) -> None:
        self.sketch.add(value)
        self.total += value
        if value > self.max:
            self.max = value

    def distribution(self) -> dict[str, Any] | None:
        count = int(self.sketch.count)
        if not count:
            return None
        out: dict[str, Any] = {"count": count}
        for name, q in QUANTILES:
            value = self.sketch.get_quantile_value(q)
            out[name] = self.max if value is None else min(self.max, float(value))
        out["max"] = self.max
        out["mean"] = self.total / count
        return out


class LatencyStats:
    """Every finished request's :class:`RequestLatency` (exactly, up to ``exact_limit``;
    sketched beyond, see the module docstring), and the last ``window`` of them."""

    def __init__(self, window: int = RECENT_WINDOW, exact_limit: int = EXACT_LIMIT) -> None:
        self.all: list[RequestLatency] = []  # while exact: every one
        self.recent: deque[RequestLatency] = deque(maxlen=window)
        self.count = 0
        self._exact_limit = exact_limit
        self._sketches: dict[str, _Sketched] | None = None  # once past exact_limit
        # The latest exact_limit, for the histograms once sketched (bounded).
        self._tail: deque[RequestLatency] = deque(maxlen=exact_limit)

    @property
    def sketched(self) -> bool:
        """True once the run-level percentiles come from the sketch."""
        return self._sketches is not None

    @classmethod
    def of(cls, views: Iterable[RequestView], window: int = RECENT_WINDOW) -> LatencyStats:
        """The figures of a list of requests (e.g. a snapshot's ``finished``): for a UI panel."""
        stats = cls(window)
        for view in views:
            stats.add(view)
        return stats

    def add(self, view: RequestView) -> None:
        if view.state is not RequestState.FINISHED:
            return
        latency = request_latency(view)
        self.count += 1
        self.recent.append(latency)
        sketches = self._sketches
        if sketches is None:
            self.all.append(latency)
            if len(self.all) <= self._exact_limit:
                return
            # Past the limit: the exact figures so far go into the sketches, then let go.
            sketches = self._sketches = {metric: _Sketched() for metric in METRICS}
            kept, self.all = self.all, []
            for earlier in kept:
                self._sketch(earlier, sketches)
            self._tail.extend(kept)
            return
        self._sketch(latency, sketches)
        self._tail.append(latency)

    @staticmethod
    def _sketch(latency: RequestLatency, sketches: dict[str, _Sketched]) -> None:
        for metric, sketched in sketches.items():
            value = getattr(latency, metric)
            if value is not None:
                sketched.add(value)

    def summary(self, *, bins: int = HISTOGRAM_BINS) -> dict[str, Any]:
        """``{"finished": n, "all": {metric: distribution}, "recent": {...}, "histograms":
        {metric: {"edges", "counts"}}, "sketched": {...} | None}``; a metric no request has is
        ``None``. ``sketched`` says, once the run outgrew the exact figures, which are sketched
        and how precise they are (the histograms are then those of the latest requests)."""
        sketches = self._sketches
        if sketches is None:
            overall = _distributions(self.all)
            sample: Iterable[RequestLatency] = self.all
            sketched = None
        else:
            overall = {metric: sketches[metric].distribution() for metric in METRICS}
            sample = self._tail
            sketched = {
                "method": "DDSketch",
                "relative_error": SKETCH_ACCURACY,
                "figures": [name for name, _ in QUANTILES],
                "exact": ["count", "max", "mean"],
                "histograms_over_latest": len(self._tail),
            }
        kept = list(sample)
        return {
            "finished": self.count,
            "window": self.recent.maxlen,
            "all": overall,
            "recent": _distributions(self.recent),
            "histograms": {metric: histogram(_values(kept, metric), bins) for metric in METRICS},
            "sketched": sketched,
        }


def _values(latencies: Iterable[RequestLatency], metric: str) -> list[float]:
    return [v for lat in latencies if (v := getattr(lat, metric)) is not None]


def _distributions(latencies: Iterable[RequestLatency]) -> dict[str, Any]:
    kept = list(latencies)
    return {metric: distribution(_values(kept, metric)) for metric in METRICS}
