"""``--otlp-traces-endpoint URL``: each request that ends, as OpenTelemetry spans, sent to a
trace backend, live or from a recorded trace.

Opened before the engine starts, the SDK imported only then (:mod:`stepview.otlp.exporter`:
its absence, or a protocol it does not speak, is one line and exit 2), it hands the driver a
:class:`~stepview.otlp.sink.SpanSink`, placed on the wall clock by the run's epoch (it needs
:data:`~stepview.outputs.entry.WALL_CLOCK`), and says at the end how many requests went out
and what was dropped. Dropped spans are said once: at once on stderr when the run prints there
(``--headless``), else in the log and in the line at the end (the TUI owns the terminal
meanwhile); and counted in ``stepview_otlp_spans_dropped_total`` when ``--metrics-port``
serves (opened before this one: it reads this output's count).

In a fleet (several ``--attach``, or a listing of servers), each plug-in server's requests
go out as the one server's would, through the one export, each span naming its server
(:func:`~stepview.otlp.sink.server_attributes`); a ``/metrics`` server has no requests to send.

Offline, ``--replay TRACE --otlp-traces-endpoint URL --headless`` sends the trace's requests
as the live run would have (at the wall times its header's ``epoch`` gives) and exits: alone,
without the TUI. What the flag also tells stepview's own vLLM (its own ``llm_request`` spans,
to the same endpoint) is the own engine's flags' (:mod:`stepview.cli.specs`), not an output's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from stepview.model.epoch import EPOCH, RunEpoch
from stepview.model.snapshot import RequestState, RequestView
from stepview.outputs.entry import (
    HELP_FILES,
    LIVE,
    WALL_CLOCK,
    Asked,
    Flag,
    FromTrace,
    Opened,
    Opening,
    Output,
    Say,
    ServerOpening,
)
from stepview.outputs.watching import METRICS, ServedMetrics
from stepview.run.spec import FLEET, OWN, REPLAY, RERUN, WATCH

if TYPE_CHECKING:
    from stepview.model.sink import SnapshotSink
    from stepview.otlp.sink import SpanOutlet, SpanSink
    from stepview.trace.store import Trace

log = logging.getLogger(__name__)

MISSING = (
    "--otlp-traces-endpoint needs OpenTelemetry's SDK and OTLP exporters "
    "(pip install 'vllm-stepview[otlp]'): {error}"
)


def open_outlet(endpoint: str) -> SpanOutlet | str:
    """The OTLP export to ``endpoint``, or why it cannot be had (one line)."""
    try:
        from stepview.otlp.exporter import SpanExport
    except ImportError as exc:
        return MISSING.format(error=exc)
    try:
        return SpanExport(endpoint)
    except (ValueError, ImportError) as exc:
        return f"--otlp-traces-endpoint {endpoint}: {exc}"


def spans_note(sink: SpanSink, endpoint: str) -> str:
    """The line a run ends with: how many requests went out as spans, and what was lost
    (``sink``'s count: a fleet's servers' sinks count there too)."""
    line = f"{sink.requests} request(s) sent as spans to {endpoint}"
    dropped = sink.outlet.dropped
    if dropped and not sink.outlet.delivered:  # "sent" would read as arrived: none did
        line = f"none of {sink.requests} request(s) reached {endpoint} as spans"
    if dropped:
        line += f"; {dropped} span(s) dropped (the receiver did not take them)"
    if sink.unsampled:
        line += f"; {sink.unsampled} left out, as their clients' trace context asked"
    return line


class SentSpans(Opened):
    """The span sink, sending; at the end, the line of what went out.

    In a fleet, each plug-in server's driver gets a sink of its own (:meth:`sinks_for`) on
    the one export, counting in this one's count, and closing nothing: :meth:`close`, at
    the run's end, closes the export."""

    def __init__(self, sink: SpanSink, endpoint: str) -> None:
        self.sinks = (sink,)
        self.sink = sink
        self.endpoint = endpoint

    def sinks_for(self, server: ServerOpening) -> Sequence[SnapshotSink]:
        from stepview.otlp.sink import SpanSink

        run = self.sink
        return (
            SpanSink(
                run.outlet,
                server.insight,
                server.epoch,
                server=server.address,
                owns=False,
                count=run.count,
            ),
        )

    def report(self, say: Say) -> None:
        say(spans_note(self.sink, self.endpoint))

    def discard(self) -> None:
        self.sink.close()

    def close(self) -> None:
        self.sink.close()  # the export, if the run's driver did not close it (a fleet's)


def open_spans(endpoint: str, opening: Opening) -> Opened | str:
    """The live run's span sink, or why it cannot be had; the metrics page, if served,
    counts its drops."""
    from stepview.otlp.sink import SpanSink

    outlet = open_outlet(endpoint)
    if isinstance(outlet, str):
        return outlet
    line = (
        f"spans are being dropped: the trace receiver at {endpoint} does not take them "
        "(the run goes on; the count comes at the end)"
    )
    headless = opening.spec.front.headless

    def dropping() -> None:
        log.warning("%s", line)
        if headless:
            opening.say(line)

    if hasattr(outlet, "on_drop"):
        outlet.on_drop = dropping
    metrics = opening.opened.get(METRICS.name)
    if isinstance(metrics, ServedMetrics):
        metrics.exporter.spans_dropped = lambda: outlet.dropped
    opening.say(f"sending each request as spans to {endpoint}")
    return SentSpans(SpanSink(outlet, opening.insight, opening.epoch), endpoint)


def recorded_epoch(trace: Trace) -> float:
    """Where a recording's driver clock 0 was on the wall clock: its header's ``epoch``, or,
    in a trace recorded before that field, its creation time less its first step's clock
    (to the second)."""
    epoch = trace.header.get(EPOCH)
    if isinstance(epoch, int | float):
        return float(epoch)
    from datetime import datetime

    created = trace.header.get("created")
    snapshots = trace.snapshots
    first = snapshots[0].clock if len(snapshots) else 0.0
    try:
        return datetime.fromisoformat(str(created)).timestamp() - first
    except ValueError:
        return time.time()


def _ended(view: RequestView) -> RequestView:
    """A request still in flight when the recording stops: cut off by the end of the run."""
    return view if view.state.done else view._replace(state=RequestState.UNFINISHED)


def send_trace(endpoint: str, source: FromTrace) -> list[str]:
    """Every request of the trace as spans, sent, and the line of what went out; that line
    as a failure (exit 1) when spans were dropped."""
    from stepview.otlp.sink import SpanSink

    outlet = open_outlet(endpoint)
    if isinstance(outlet, str):
        return [outlet]
    trace = source.trace
    last = trace.snapshots[len(trace.snapshots) - 1]
    epoch = RunEpoch()
    epoch.epoch = recorded_epoch(trace)
    sink = SpanSink(outlet, source.insight(), epoch)  # every request's timeline kept
    views: list[Any] = [*last.finished, *(_ended(v) for v in last.active)]
    sink.send(views, last.info.model or str(trace.header.get("model") or ""))
    outlet.close()
    note = spans_note(sink, endpoint)
    if outlet.dropped:
        return [note]
    source.say(note)
    return []


def _refused(endpoint: str, asked: Asked) -> str | None:
    """Sent offline, a trace's requests go out without the TUI."""
    if asked.replay is not None and not asked.headless:
        return "--replay FILE --otlp-traces-endpoint URL sends the trace as spans: add --headless"
    return None


SPANS: Output[str] = Output(
    name="spans",
    flags=(
        Flag(
            "--otlp-traces-endpoint",
            HELP_FILES,
            {
                "metavar": "URL",
                "help": "send each request as OpenTelemetry spans (the request, and each "
                "waiting, prefill, decode and preempted stretch) to this OTLP endpoint: gRPC, "
                "or HTTP with OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf (URL ending in "
                "/v1/traces); on stepview's own engine vLLM exports its own spans there too; "
                "with --replay FILE --headless: send the trace's requests, then exit",
            },
        ),
    ),
    kind=LIVE,
    sources=frozenset({OWN, WATCH, FLEET, RERUN, REPLAY}),
    needs=frozenset({WALL_CLOCK}),
    spec=lambda values: values["otlp_traces_endpoint"],
    refuse=_refused,
    open=open_spans,
    from_trace=send_trace,
    alone_from_trace=True,
)

ENTRIES: tuple[Output[Any], ...] = (SPANS,)
"""This module's entries: after the run's files in ``--help``, before the watching outputs
(so it opens after the metrics page, whose count of dropped spans it sets)."""
