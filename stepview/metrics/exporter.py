"""The driver sink that keeps the metrics up to date, one snapshot at a time.

It runs on the driver thread between two engine steps, like the results file and the trace,
so it must cost little whatever the run holds: the waiting requests are counted from what a
step changed (:mod:`stepview.metrics.waiting`), the oldest waiting one is the first found
from the front of the active views (they are in arrival order: usually within the first
few, after the running ones), preemptions come from the run insight's running totals, alerts
are counted again only when the insight's tuple of them changes (it is the same object while
nothing does), as are the engine's description and whether the plug-in reports (its
``detailed_states``) when the snapshot's info changes, and a series is set only when its
value changed. The HTTP server
(:mod:`stepview.metrics.server`) only reads what this wrote; ``prometheus_client`` locks each
value, so a scrape never waits for a step, though it may see one step's figures half
written.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from stepview.metrics.families import BUDGET_KINDS, StepviewMetrics
from stepview.metrics.waiting import Counts, WaitingByReason
from stepview.model.alerts import ALERT_KINDS, Alert
from stepview.model.engine_api import LinkState
from stepview.model.errors import describe
from stepview.model.snapshot import (
    EngineInfo,
    EngineState,
    RankStatus,
    RequestView,
    StepSnapshot,
    oldest_waiting,
)

if TYPE_CHECKING:
    from prometheus_client import Counter, Gauge

    from stepview.insight.run import RunInsight

log = logging.getLogger(__name__)


def _no_link() -> LinkState | None:
    return None


def _none_dropped() -> int:
    return 0


class MetricsExporter:
    """A :class:`~stepview.model.sink.SnapshotSink` that writes every snapshot's figures into
    :attr:`metrics` (see :mod:`stepview.metrics.families` for what each one says)."""

    def __init__(self, insight: RunInsight | None = None, *, process: bool = True) -> None:
        """``insight`` is the run's (the driver's): its preemptions feed the counters."""
        self.metrics = StepviewMetrics(process=process)
        self.insight = insight
        self.link: Callable[[], LinkState | None] = _no_link
        """How a watched engine's link stands (the driver's :attr:`~stepview.engine.driver.
        loop.Driver.link`), set once the driver exists; none for an engine of one's own."""
        self.spans_dropped: Callable[[], int] = _none_dropped
        """How many spans the ``--otlp-traces-endpoint`` export dropped so far (set by that
        output when it opens: :mod:`stepview.outputs.spans`)."""
        self._dropped = 0
        self.error: str | None = None
        self.on_close: Callable[[], None] | None = None
        """Called once when the driver closes its sinks (the launcher stops the server)."""
        self._waiting = WaitingByReason()
        self._waiting_series: dict[tuple[str, str], Gauge] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self._step = 0
        self._state: EngineState | None = None
        self._info: EngineInfo | None = None
        # info.detailed_states as last set: on until something says the plug-in is off (as
        # EngineInfo's default), so a scrape before the first snapshot does not read "off".
        self._plugin = True
        self.metrics.plugin_active.set(1)
        self._ranks: tuple[RankStatus, ...] | None = None
        self._alerts: tuple[Alert, ...] | None = None
        self._alert_keys: frozenset[tuple[str, str | None]] = frozenset()
        self._preemptions = 0
        self._tokens_lost = 0
        self._unseen = 0
        self._budget: dict[str, tuple[Gauge, Counter]] = {
            kind: (self.metrics.budget.labels(kind), self.metrics.budget_total.labels(kind))
            for kind in BUDGET_KINDS
        }
        for kind in ALERT_KINDS:  # every kind's series from the start, at 0
            self.metrics.alerts.labels(kind)
            self.metrics.alerts_raised.labels(kind)

    # -- SnapshotSink ------------------------------------------------------------------------

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        if self.error is not None:
            return
        try:
            self._update(snapshot)
        except Exception as exc:  # a sink never stops the engine: say so once, at the end
            log.exception("updating the metrics failed at step %d", snapshot.step)
            self.error = f"metrics stopped at step {snapshot.step}: {describe(exc)}"

    def close(self) -> None:
        on_close, self.on_close = self.on_close, None
        if on_close is not None:
            on_close()

    # -- the figures -------------------------------------------------------------------------

    def _update(self, snapshot: StepSnapshot) -> None:
        metrics = self.metrics
        if snapshot.engine_state is not self._state:
            self._state = snapshot.engine_state
            metrics.engine_state.state(snapshot.engine_state.value)
        if snapshot.info is not self._info:
            info = self._info = snapshot.info
            metrics.engine.info(
                {"model": info.model, "vllm_version": info.vllm_version, "attached": info.attached}
            )
            if info.detailed_states != self._plugin:  # the plug-in reports, or went off
                self._plugin = info.detailed_states
                metrics.plugin_active.set(1 if info.detailed_states else 0)
        if snapshot.step > self._step:
            metrics.steps.inc(snapshot.step - self._step)
            self._step = snapshot.step
            self._spent(snapshot)
        if snapshot.ranks is not self._ranks:
            self._ranks = snapshot.ranks
            for rank in snapshot.ranks:
                metrics.rank_connected.labels(str(rank.rank)).set(1 if rank.connected else 0)
        self._count_waiting(snapshot, self._waiting.observe(snapshot))
        oldest = oldest_waiting(snapshot.active)
        age = 0.0 if oldest is None else max(0.0, snapshot.clock - oldest.timings.arrival)
        metrics.oldest_waiting.set(age)
        self._count_preemptions()
        if snapshot.alerts is not self._alerts:
            self._count_alerts(snapshot.alerts)
        link = self.link()
        metrics.behind.set(0.0 if link is None else link.behind)
        if link is not None and link.unseen > self._unseen:
            metrics.unseen.inc(link.unseen - self._unseen)
            self._unseen = link.unseen
        dropped = self.spans_dropped()
        if dropped > self._dropped:
            metrics.spans_dropped.inc(dropped - self._dropped)
            self._dropped = dropped

    def _spent(self, snapshot: StepSnapshot) -> None:
        """A new step: its token budget, by what it went to."""
        budget = snapshot.budget
        if budget is None:
            return
        used = (budget.prefill_tokens, budget.decode_tokens, budget.unused_tokens)
        for kind, tokens in zip(BUDGET_KINDS, used, strict=True):
            gauge, counter = self._budget[kind]
            gauge.set(tokens)
            if tokens:
                counter.inc(tokens)

    def _count_waiting(self, snapshot: StepSnapshot, counts: Counts) -> None:
        ranks = snapshot.ranks
        by_label: dict[tuple[str, str], int] = {}
        for (queue, code), count in counts.items():
            rank = str(ranks[queue].rank) if queue < len(ranks) else str(queue)
            by_label[rank, code] = count
        before = self._counts
        for key in before.keys() - by_label.keys():  # a reason no longer counted: 0, not gone
            by_label[key] = 0
        series = self._waiting_series
        for key, count in by_label.items():
            if before.get(key) != count:
                gauge = series.get(key)
                if gauge is None:
                    gauge = series[key] = self.metrics.waiting.labels(*key)
                gauge.set(count)
        self._counts = by_label

    def _count_preemptions(self) -> None:
        insight = self.insight
        if insight is None:
            return
        timelines = insight.timelines
        if timelines.preemptions > self._preemptions:
            self.metrics.preemptions.inc(timelines.preemptions - self._preemptions)
            self._preemptions = timelines.preemptions
        if timelines.tokens_lost > self._tokens_lost:
            self.metrics.tokens_lost.inc(timelines.tokens_lost - self._tokens_lost)
            self._tokens_lost = timelines.tokens_lost

    def _count_alerts(self, alerts: tuple[Alert, ...]) -> None:
        """The alerts changed: how many of each kind hold, and which were raised."""
        self._alerts = alerts
        metrics = self.metrics
        kinds = Tally(alert.kind for alert in alerts)
        for kind in {*ALERT_KINDS, *kinds}:
            metrics.alerts.labels(kind).set(kinds[kind])
        keys = frozenset(alert.key for alert in alerts)
        for alert in alerts:
            if alert.key not in self._alert_keys:
                metrics.alerts_raised.labels(alert.kind).inc()
        self._alert_keys = keys
