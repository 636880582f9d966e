"""``--otlp-traces-endpoint URL``: the OTLP output, opened for a live run or run over a trace.

One output, kept in one module so that it can become one entry of the output registry: how
it opens (the SDK imported only now; its absence, or a protocol it does not speak, is one
line and exit 2 before the engine starts), the sink the driver feeds
(:class:`~stepview.otlp.sink.SpanSink`), what it says at the end (requests sent, spans
dropped), and the offline route: ``--replay TRACE --otlp-traces-endpoint URL --headless``
sends the trace's requests as spans and exits, with no engine and no TUI.

Dropped spans are said once: at once on stderr when the run prints there (``--headless``),
else in the log and in the line at the end (the TUI owns the terminal meanwhile); and
counted in ``stepview_otlp_spans_dropped_total`` with ``--metrics-port``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stepview.insight.run import RunInsight
from stepview.launch.exits import EXIT_FAILED, EXIT_OK, fail, notice
from stepview.launch.summary import summarize
from stepview.model.sink import SnapshotSink
from stepview.model.snapshot import RequestState, RequestView
from stepview.otlp.sink import RunEpoch, SpanOutlet, SpanSink
from stepview.trace.format import TraceError
from stepview.trace.reader import load_trace
from stepview.trace.store import Trace

log = logging.getLogger(__name__)

MISSING = (
    "--otlp-traces-endpoint needs OpenTelemetry's SDK and OTLP exporters "
    "(pip install 'vllm-stepview[otlp]'): {error}"
)
EPOCH = "epoch"  # the trace header's field: wall time of driver clock 0 (RunEpoch)


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


def open_spans(
    endpoint: str, insight: RunInsight, epoch: RunEpoch, *, say_drops: bool
) -> SpanSink | str:
    """The live run's span sink, or why it cannot be had. ``say_drops``: say the first
    dropped span on stderr at once (a headless run); else only in the log, until the end."""
    outlet = open_outlet(endpoint)
    if isinstance(outlet, str):
        return outlet
    line = (
        f"spans are being dropped: the trace receiver at {endpoint} does not take them "
        "(the run goes on; the count comes at the end)"
    )

    def dropping() -> None:
        log.warning("%s", line)
        if say_drops:
            notice(line)

    if hasattr(outlet, "on_drop"):
        outlet.on_drop = dropping
    notice(f"sending each request as spans to {endpoint}")
    return SpanSink(outlet, insight, epoch)


def spans_of(sinks: Sequence[SnapshotSink]) -> SpanSink | None:
    for sink in sinks:
        if isinstance(sink, SpanSink):
            return sink
    return None


def spans_note(sink: SpanSink, endpoint: str) -> str:
    """The line a run ends with: how many requests went out as spans, and what was lost."""
    line = f"{sink.requests} request(s) sent as spans to {endpoint}"
    dropped = sink.outlet.dropped
    if dropped:
        line += f"; {dropped} span(s) dropped (the receiver did not take them)"
    if sink.unsampled:
        line += f"; {sink.unsampled} left out, as their clients' trace context asked"
    return line


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


def export_replay_spans(trace_path: Path, endpoint: str) -> int:
    """``--replay TRACE --otlp-traces-endpoint URL --headless``: every request of the trace
    as spans, sent; the exit code (1 when spans were dropped)."""
    try:
        trace = load_trace(trace_path)
    except TraceError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot read trace {trace_path}: {exc.strerror or exc}")
    snapshots = trace.snapshots
    if not len(snapshots):
        return fail(f"{trace_path}: the trace holds no step to send")
    if trace.warning:
        notice(f"{trace_path}: {trace.warning}")
    outlet = open_outlet(endpoint)
    if isinstance(outlet, str):
        return fail(outlet)
    insight = summarize(trace, keep_steps=True)  # every request's timeline kept
    last = snapshots[len(snapshots) - 1]
    epoch = RunEpoch()
    epoch.epoch = recorded_epoch(trace)
    sink = SpanSink(outlet, insight, epoch)
    views: list[Any] = [*last.finished, *(_ended(v) for v in last.active)]
    sink.send(views, last.info.model or str(trace.header.get("model") or ""))
    outlet.close()
    notice(spans_note(sink, endpoint))
    return EXIT_FAILED if outlet.dropped else EXIT_OK
