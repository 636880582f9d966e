"""One run's insight: timelines, latency figures and alerts, fed by every snapshot.

:class:`RunInsight` is what the driver calls after building each snapshot (the alerts it
returns go into that snapshot) and what a replay feeds the recorded snapshots to, so a live
run and its trace give the same answers. The results file and the headless printer ask it
for a request's ``timeline``/``preemptions`` when the request finishes; the end of a run asks
it for the :meth:`summary`.
"""

from __future__ import annotations

from typing import Any

from stepview.insight.alerts import Thresholds, Watchdogs
from stepview.insight.counters import CounterSeries
from stepview.insight.percentiles import RECENT_WINDOW, LatencyStats
from stepview.insight.timeline import TimelineTracker
from stepview.model.alerts import Alert, alert_record
from stepview.model.recent import KEEP_FINISHED
from stepview.model.snapshot import StepSnapshot


class RunInsight:
    """Everything :mod:`stepview.insight` works out, kept up to date one snapshot at a time.

    Fed by one thread (the driver's, or a replay's). ``observe`` costs O(changed requests)
    plus an identity test per active request.
    """

    def __init__(
        self,
        thresholds: Thresholds | None = None,
        *,
        window: int = RECENT_WINDOW,
        keep_steps: bool = False,
        keep_done: int = KEEP_FINISHED,
    ) -> None:
        """``keep_steps`` keeps every step's figures in :attr:`step_series` and every
        request's timeline (for a Chrome trace export of the whole run); without it
        :attr:`step_series` is None and the timelines of finished requests are kept for the
        latest ``keep_done`` only (each is in the results file by then), so memory does not
        grow with the run."""
        self.timelines = TimelineTracker(keep_done=None if keep_steps else keep_done)
        self.step_series = CounterSeries() if keep_steps else None
        self.latency = LatencyStats(window)
        self.watchdogs = Watchdogs(thresholds)
        self.steps = 0

    def observe(self, snapshot: StepSnapshot) -> tuple[Alert, ...]:
        """Fold the snapshot in; returns the alerts that hold after it."""
        changed = self.timelines.observe(snapshot)
        if self.step_series is not None:
            self.step_series.observe(snapshot)
        for timeline in changed:
            if timeline.done and timeline.view is not None and not timeline.counted:
                timeline.counted = True
                self.latency.add(timeline.view)
        self.steps = snapshot.step
        return self.watchdogs.observe(snapshot, changed)

    def request_fields(self, request_id: str) -> dict[str, Any]:
        """``timeline`` and ``preemptions`` of one request, for its JSON record."""
        return self.timelines.records(request_id)

    def summary(self) -> dict[str, Any]:
        """The run in figures: latency distributions, preemptions, alerts (JSON-ready)."""
        return {
            "steps": self.steps,
            "latency": self.latency.summary(),
            "preemptions": {
                "count": self.timelines.preemptions,
                "requests": self.timelines.preempted_requests,
                "tokens_lost": self.timelines.tokens_lost,
            },
            "alerts": [alert_record(a) for a in self.watchdogs.raised],
            "alerts_raised": self.watchdogs.raised_count,
        }
