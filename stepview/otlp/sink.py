"""The driver's sink for ``--otlp-traces-endpoint``: each request that ends, as spans, queued.

It runs on the driver thread between two engine steps, so it does only what costs little: for
each request that reached a final state in the step (finished, aborted, rejected, or cut off
by the end of the run), it builds its spans from the timeline the run's insight already holds
(:func:`~stepview.insight.spans.request_spans`) and hands them to the export, which only queues
them for its own thread (:mod:`stepview.otlp.exporter`). No network on this thread, ever: a
receiver that is slow or down costs the run dropped spans, counted, not steps.

The spans' times are placed on the wall clock by the run's epoch
(:class:`~stepview.model.epoch.RunEpoch`, a sink ahead of this one).

In a fleet, each plug-in server's driver has a sink of its own (its insight, its epoch), all
queueing to one export, which none of them closes (``owns`` False: the run closes it once,
after every driver's end); each of their spans carries its server's address
(:func:`server_attributes`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from stepview.insight.run import RunInsight
from stepview.insight.spans import Attributes, SpanData, request_spans
from stepview.model.address import zmq_endpoint
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

    @property
    def delivered(self) -> int: ...


SERVER = "stepview.server"
"""The span attribute naming a fleet's server as the fleet does (``tcp://HOST:PORT``)."""


def server_attributes(address: str) -> Attributes:
    """A fleet's server, on each of its spans: the address as the fleet names it, and the
    semantic conventions' ``server.address`` (host, or the ``ipc://`` socket's path) and
    ``server.port`` (a fleet's plug-in servers are zmq endpoints, parsed as the command line
    parsed them)."""
    try:
        endpoint = zmq_endpoint(address)
    except ValueError:  # not a plug-in server's: its name alone
        return {SERVER: address}
    if not endpoint.tcp:
        return {SERVER: address, "server.address": endpoint.path}
    return {
        SERVER: address,
        "server.address": endpoint.host.strip("[]"),
        "server.port": endpoint.port,
    }


class SpanCount:
    """What went out: the requests sent as spans, and those their clients asked to leave
    out; one count for the run (a fleet's sinks share it)."""

    def __init__(self) -> None:
        self.requests = 0
        self.unsampled = 0


class SpanSink:
    """A :class:`~stepview.model.sink.SnapshotSink`: every request that ends, as spans."""

    def __init__(
        self,
        outlet: SpanOutlet,
        insight: RunInsight,
        epoch: RunEpoch,
        *,
        server: str | None = None,
        owns: bool = True,
        count: SpanCount | None = None,
    ) -> None:
        """``insight`` is the driver's (fed every snapshot before the sinks): its timelines
        are the requests' phases. ``server``: a fleet's server, whose address each span
        carries. ``owns``: :meth:`close` closes the outlet (no other sink shares it).
        ``count``: the run's, when another sink counts there too."""
        self.outlet = outlet
        self.count = SpanCount() if count is None else count
        self.error: str | None = None
        self._insight = insight
        self._epoch = epoch
        self._server = server_attributes(server) if server is not None else None
        self._owns = owns

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
                self.count.unsampled += 1
                continue
            sent = spans.spans
            if self._server is not None:
                server = self._server
                sent = tuple(replace(s, attributes={**s.attributes, **server}) for s in sent)
            self.outlet.send(sent)
            self.count.requests += 1

    @property
    def requests(self) -> int:
        """Requests sent as spans (by every sink sharing this one's count)."""
        return self.count.requests

    @property
    def unsampled(self) -> int:
        """Requests whose client asked for no recorded trace."""
        return self.count.unsampled

    def close(self) -> None:
        """Close the outlet, once, if this sink owns it."""
        if self._owns:
            self._owns = False
            self.outlet.close()
