"""The driver's sink for ``--otlp-traces-endpoint``: each request that ends, as spans, queued.

It runs on the driver thread between two engine steps, so it does only what costs little: for
each request that reached a final state in the step (finished, aborted, rejected, or cut off
by the end of the run), it builds its spans from the timeline the run's insight already holds
(:func:`~stepview.insight.spans.request_spans`) and hands them to the export, which only queues
them for its own thread (:mod:`stepview.otlp.exporter`). No network on this thread, ever: a
receiver that is slow or down costs the run dropped spans, counted, not steps.

The spans' times are placed on the wall clock by the run's epoch
(:class:`~stepview.model.epoch.RunEpoch`, a sink ahead of this one).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from stepview.insight.run import RunInsight
from stepview.insight.spans import SpanData, request_spans
from stepview.model.epoch import RunEpoch
from stepview.model.errors import describe
from stepview.model.snapshot import RequestView, StepSnapshot

log = logging.getLogger(__name__)


class SpanOutlet(Protocol):
    """Where the spans go (:class:`~stepview.otlp.exporter.SpanExport`): queued, not sent."""

    def send(self, spans: Sequence[SpanData]) -> None: ...

    def close(self, timeout_s: float = 5.0) -> None: ...

    @property
    def dropped(self) -> int: ...


class SpanSink:
    """A :class:`~stepview.model.sink.SnapshotSink`: every request that ends, as spans."""

    def __init__(self, outlet: SpanOutlet, insight: RunInsight, epoch: RunEpoch) -> None:
        """``insight`` is the run's (the driver's, fed every snapshot before the sinks):
        its timelines are the requests' phases."""
        self.outlet = outlet
        self.requests = 0  # requests sent as spans
        self.unsampled = 0  # requests whose client asked for no recorded trace
        self.error: str | None = None
        self._insight = insight
        self._epoch = epoch

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        if not finished or self.error is not None:
            return
        try:
            self.send(finished, snapshot.info.model)
        except Exception as exc:  # a sink never stops the engine: say so at the end
            log.exception("building the spans failed at step %d", snapshot.step)
            self.error = f"spans stopped at step {snapshot.step}: {describe(exc)}"

    def send(self, views: Sequence[RequestView], model: str) -> None:
        """Queue the spans of ``views`` (requests in a final state)."""
        epoch = self._epoch.now()
        timelines = self._insight.timelines
        for view in views:
            spans = request_spans(view, timelines.get(view.request_id), model, epoch)
            if not spans.sampled:
                self.unsampled += 1
                continue
            self.outlet.send(spans.spans)
            self.requests += 1

    def close(self) -> None:
        self.outlet.close()
