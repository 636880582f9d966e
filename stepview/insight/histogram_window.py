"""What a server's cumulative Prometheus counters and histograms did over the last N seconds.

A server's ``/metrics`` gives totals since it started: a counter's value, and for a histogram
the count of observations at or below each bucket's upper bound (``le``), with their count
and sum. What happened *lately* is the difference between two readings, and latency
percentiles over a sliding window are read off the difference of two histograms, bucket by
bucket, the way Prometheus' ``histogram_quantile(q, rate(...[window]))`` does. This module is
that arithmetic and nothing else: readings in, increases and quantiles out, no I/O.

Three things make it more than a subtraction:

* **A server restart** resets every counter to 0. As Prometheus' ``increase()`` does, a value
  lower than the one before it (for a histogram: any bucket, or the count) means the counter
  started again from zero between the two readings, so the increase is the new value whole.
  A histogram whose buckets changed (a server restarted with other bucket bounds) is read
  the same way.
* **A metric the server does not have** (an older vLLM) or a scrape that failed is a reading of
  ``None``: it adds nothing, and the next reading is compared with the last one there was.
* **An empty window** (no observation in it) has no quantile: ``None``, never 0.

A window holds a minute of readings (one a second), and a fleet's watch holds a dozen windows
for each of its ``/metrics`` servers: their increases are kept as plain arrays of doubles,
the bucket bounds once for the readings that share them (as Python floats in tuples, they
were most of a fleet's memory: ~0.3 MB a server).
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Sequence
from typing import NamedTuple, TypeVar

T = TypeVar("T")


class Histogram(NamedTuple):
    """A Prometheus histogram as read: cumulative counts per upper bound, ascending.

    ``bounds[-1]`` is ``inf`` in a well-formed histogram (the ``+Inf`` bucket), and
    ``counts[-1]`` is then the number of observations.
    """

    bounds: tuple[float, ...]
    counts: Sequence[float]  # a tuple as read; a window's increases keep an array
    total: float = 0.0  # the sum of the observations (``_sum``)

    @property
    def observations(self) -> float:
        return self.counts[-1] if self.counts else 0.0


def counter_increase(older: float | None, newer: float | None) -> float:
    """How much a counter grew from ``older`` to ``newer`` (a fall: it restarted from 0)."""
    if newer is None:
        return 0.0
    if older is None or newer < older:
        return newer
    return newer - older


def histogram_increase(older: Histogram | None, newer: Histogram) -> Histogram:
    """The observations ``newer`` holds that ``older`` did not; ``newer`` whole after a reset."""
    if (
        older is None
        or older.bounds != newer.bounds
        or any(new < old for new, old in zip(newer.counts, older.counts, strict=True))
    ):
        return newer
    counts = tuple(new - old for new, old in zip(newer.counts, older.counts, strict=True))
    return Histogram(newer.bounds, counts, max(0.0, newer.total - older.total))


def histogram_sum(histograms: Sequence[Histogram]) -> Histogram | None:
    """Observations of several increases together (those with the latest bucket bounds)."""
    if not histograms:
        return None
    bounds = histograms[-1].bounds
    same = [h for h in histograms if h.bounds == bounds]
    counts = tuple(sum(column) for column in zip(*(h.counts for h in same), strict=True))
    return Histogram(bounds, counts, sum(h.total for h in same))


def quantile(q: float, histogram: Histogram | None) -> float | None:
    """The ``q`` quantile (0..1) of ``histogram``'s observations, as ``histogram_quantile``.

    Linear interpolation inside the bucket the rank falls in (the first bucket from 0, or
    from its bound when that is below 0); a rank in the ``+Inf`` bucket answers the highest
    finite bound, all that can be said. ``None`` with no observation.
    """
    if histogram is None or histogram.observations <= 0 or not 0.0 <= q <= 1.0:
        return None
    rank = q * histogram.observations
    below_bound, below_count = 0.0, 0.0
    for index, (bound, count) in enumerate(zip(histogram.bounds, histogram.counts, strict=True)):
        if count >= rank and count > below_count:
            if math.isinf(bound):
                return below_bound if index else None
            lower = below_bound if index else min(0.0, bound)
            return lower + (bound - lower) * (rank - below_count) / (count - below_count)
        below_bound, below_count = bound, count
    return below_bound


class CounterWindow:
    """A counter's increase over the last ``span`` seconds, from successive readings."""

    def __init__(self, span: float) -> None:
        self.span = span
        self._last: float | None = None
        self._at = array("d")  # when each increase was read
        self._steps = array("d")  # the increase since the reading before

    def add(self, at: float, value: float | None) -> float:
        """Take a reading (``None``: none this time); returns the increase since the last."""
        if value is None:
            return 0.0
        step = counter_increase(self._last, value) if self._last is not None else 0.0
        self._last = value
        self._at.append(at)
        self._steps.append(step)
        gone = 0
        while gone < len(self._at) and self._at[gone] <= at - self.span:
            gone += 1
        del self._at[:gone], self._steps[:gone]
        return step

    def increase(self) -> float:
        return sum(self._steps)


class HistogramWindow:
    """A histogram's observations over the last ``span`` seconds, from successive readings.

    The first reading is the baseline (what the server held before the watch began is not
    in the window); each later one adds its increase over the reading before it.
    """

    def __init__(self, span: float) -> None:
        self.span = span
        self._last: Histogram | None = None
        self._steps: deque[tuple[float, Histogram]] = deque()  # counts: arrays

    def add(self, at: float, value: Histogram | None) -> None:
        if value is None:
            return
        if self._last is not None:
            bounds, counts, total = histogram_increase(self._last, value)
            if self._steps and self._steps[-1][1].bounds == bounds:
                bounds = self._steps[-1][1].bounds  # one tuple for the readings that share it
            self._steps.append((at, Histogram(bounds, array("d", counts), total)))
        self._last = value
        _forget(self._steps, at - self.span)

    def observed(self) -> Histogram | None:
        """What the window holds (``None`` before two readings)."""
        return histogram_sum([step for _, step in self._steps])

    def quantiles(self, qs: Sequence[float]) -> tuple[float | None, ...]:
        observed = self.observed()
        return tuple(quantile(q, observed) for q in qs)


def _forget(steps: deque[tuple[float, T]], before: float) -> None:
    """Drop the increases that happened before the window's start."""
    while steps and steps[0][0] <= before:
        steps.popleft()
