"""``--events``: the stream opened for a live run, and a replayed trace's events.

The stream itself is :mod:`stepview.events`; this is what the modes call: open it before the
engine starts, or say in one line why it cannot be (exit 2), and, for ``--replay TRACE
--events DEST --headless``, derive the trace's events, hand them over, and exit.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from stepview.launch.exits import EXIT_FAILED, EXIT_OK, fail, notice, stop_on_signals

if TYPE_CHECKING:
    from stepview.cli.args import OwnOptions
    from stepview.events.output import EventsOutput
    from stepview.events.spec import EventsSpec
    from stepview.metrics.exporter import MetricsExporter


def events_on_stdout(options: OwnOptions) -> bool:
    """``--events -``: standard output is the events', so a mode prints nothing else there."""
    return options.events is not None and options.events.on_stdout


def open_events_output(
    spec: EventsSpec, metrics: MetricsExporter | None = None
) -> EventsOutput | int:
    """The stream's destinations, open (the served address named on stderr), or the exit
    code of one that cannot be had. Readers' lost events count in ``metrics``, if served."""
    from stepview.events.output import EventsUnavailable, open_events

    try:
        output = open_events(spec)
    except EventsUnavailable as exc:
        return fail(str(exc))
    if output.server is not None:
        notice(f"serving events at {output.server.url}")
    if metrics is not None:
        output.count_dropped = metrics.metrics.events_dropped.inc
    return output


def replay_events(path: Path, spec: EventsSpec) -> int:
    """``--replay TRACE --events DEST --headless``: every event of the trace, then exit.

    Its times are the recording's: ``time`` is the trace's start (its header's ``created``)
    plus the run's clock. Served over HTTP, the whole trace is kept for readers, and the run
    ends once a reader has connected and every reader has had every event (or on a signal).
    """
    from dataclasses import replace

    from stepview.events.derive import EventDeriver, events_of
    from stepview.trace.format import TraceError
    from stepview.trace.reader import load_trace

    try:
        trace = load_trace(path)
    except TraceError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot read trace {path}: {exc.strerror or exc}")
    snapshots = trace.snapshots
    if trace.warning:
        notice(f"{path}: {trace.warning}")
    start = _started(trace.header.get("created"))
    attached = trace.info.attached or None
    deriver = EventDeriver(
        step_every=spec.step_every,
        prompts=spec.prompts,
        server=attached,
        wall=lambda snapshot: start + snapshot.clock,
    )
    events = list(events_of(snapshots, deriver))
    if spec.served is not None:  # every event of the trace stays for its readers
        spec = replace(spec, buffer=max(spec.buffer, len(events)))
    output = open_events_output(spec)
    if isinstance(output, int):
        return output
    try:
        for outlet in output.outlets:
            outlet.put(events)
        if output.server is not None:
            notice(f"{len(events)} events of {path} ready; waiting for a reader")
            with stop_on_signals() as stop:
                output.wait_for_readers(stop)
    finally:
        output.close()
    error = output.error()
    if error is not None:
        return fail(error, EXIT_FAILED)
    return EXIT_OK


def _started(created: object) -> float:
    """The trace's start on the wall clock (its header's ``created``), or now."""
    if isinstance(created, str):
        try:
            return datetime.fromisoformat(created).timestamp()
        except ValueError:
            pass
    return time.time()
