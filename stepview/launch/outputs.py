"""What a live run writes, from opening it before the engine starts to the last word.

A run writes up to four files: the results file (``--results``), the trace (``--record``),
and, at its end, the exports (``--export-csv``, ``--export-chrome-trace``); and it may serve
its metrics (``--metrics-port``). All four modes (the TUI, ``--headless``, and both watching a
server with ``--attach``) do it the same way, so one place owns it: a path that cannot be
opened, or a port that cannot be had, stops the run before the engine does anything (exit 2,
one line), and at the end every file that failed is named, whether it failed mid-run (disk
full) or while exporting.

The results file has two lives. In the TUI, with no ``--results``, a new one is made in
stepview's data directory, and removed again if the run finished nothing: the user did not
ask for it, so an empty one is only litter. A file the user named is appended to and never
removed. Headless runs print their results, so they write a results file only when named.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stepview.cli.args import OwnOptions
from stepview.files.records import Annotate
from stepview.insight.run import RunInsight
from stepview.launch.exits import fail, notice, unfinished_note
from stepview.launch.export import export_run
from stepview.launch.paths import default_results_path
from stepview.model.engine_api import LinkState
from stepview.model.sink import SnapshotSink
from stepview.model.snapshot import StepSnapshot

if TYPE_CHECKING:
    from stepview.metrics.exporter import MetricsExporter
    from stepview.trace.flight import FlightRecorder


class RunOutputs:
    """The run's open file sinks and what is left to do with them at the end."""

    def __init__(
        self,
        sinks: list[SnapshotSink],
        results: Path | None,
        *,
        default_results: bool,
        options: OwnOptions,
        metrics: MetricsExporter | None = None,
    ) -> None:
        """``results`` is where the results go (``None``: nowhere); ``default_results``, that
        stepview chose the path itself (removed at the end when empty); ``metrics``, the
        exporter of ``--metrics-port`` (already in ``sinks``), serving."""
        self.sinks = sinks
        """The results writer, trace recorder and metrics exporter, for the driver."""
        self.results = results
        self.results_offset = 0  # where this run's records begin in it (a file appended to)
        self.default_results = default_results
        self.metrics = metrics
        self.flight: FlightRecorder | None = None
        """The ``--flight-recorder`` (already in ``sinks``), for ``SIGUSR1`` and the F key."""
        self._options = options

    def follow_link(self, link: Callable[[], LinkState | None]) -> None:
        """A watched server's link (the driver's), for the metrics of how far behind it the
        view is and which of its ranks are reached."""
        if self.metrics is not None:
            self.metrics.link = link

    def discard(self) -> None:
        """The run never started (a usage error only the engine could see): remove the
        results file stepview made for it, if it holds nothing, and stop serving metrics."""
        self._is_empty()
        if self.metrics is not None:
            self.metrics.close()

    def report_results(self, unfinished: int) -> None:
        """Say where the results are, if there are any (an empty default file is removed),
        and how many requests the run left unfinished (they are in the file too); and the
        other files the run spread over (:meth:`report_files`)."""
        self.report_files()
        if self._is_empty():
            return
        note = unfinished_note(unfinished, None)
        also = f" ({note} recorded there too)" if note else ""
        notice(f"finished requests saved in {self.results}{also}")

    def report_files(self) -> None:
        """Name the files a long run spread over: a rotated trace's parts, flight recordings."""
        from stepview.launch.flight import recordings_note
        from stepview.trace.recorder import TraceRecorder

        for sink in self.sinks:
            if isinstance(sink, TraceRecorder) and len(sink.parts) > 1:
                notice(f"trace recorded in {len(sink.parts)} parts, {sink.parts[0]} to {sink.path}")
        note = recordings_note(self.flight)
        if note is not None:
            notice(note)

    def file_errors(self) -> list[str]:
        """Why a file stopped being written mid-run (disk full, file removed), one line each.

        The engine ran on regardless (a sink never stops it), so this is the only place the
        user learns that a file holds less than the run produced.
        """
        from stepview.files.sinks import sink_errors

        return sink_errors(self.sinks)

    def finish(self, insight: RunInsight, snapshot: StepSnapshot) -> list[str]:
        """Write the exports the flags ask for, from the run's ``insight`` and last
        ``snapshot``, each named as it is written; every file that failed, one line each
        (the mid-run failures first)."""
        errors = self.file_errors()
        options = self._options
        results = None if self.results is None else (self.results, self.results_offset)
        return errors + export_run(
            options.export_csv, options.export_chrome_trace, insight, snapshot, results
        )

    def _is_empty(self) -> bool:
        """True when the results file holds nothing; a default one that is empty is deleted."""
        path = self.results
        if path is None:
            return True
        try:
            if path.stat().st_size:
                return False
            if self.default_results:
                path.unlink()
        except OSError:
            pass
        return True


def open_outputs(
    options: OwnOptions,
    header: Callable[[], Mapping[str, Any]],
    insight: RunInsight,
    *,
    default_results: bool,
    annotate: Annotate | None = None,
) -> RunOutputs | int:
    """Serve the metrics, open the results file and the trace, before the engine starts; an
    exit code instead when one cannot be had (nothing is left behind then).

    ``default_results``: with no ``--results``, write a new results file in stepview's
    data directory (the TUI), instead of none (headless: the results are printed).
    ``header`` gives the trace header's extra fields once the engine is up; ``insight``
    adds each request's timeline and preemptions to its result (``annotate``: those and more).
    """
    from stepview.files.sinks import file_sinks

    flight: FlightRecorder | None = None
    if options.flight_recorder is not None:
        from stepview.launch.flight import open_flight

        made = open_flight(options, header, say=options.headless)
        if isinstance(made, str):
            return fail(made)
        flight = made
    metrics: MetricsExporter | None = None
    if options.metrics_port is not None:
        served = serve_metrics(options, insight)
        if isinstance(served, int):
            return served
        metrics = served
    events = None  # --events: the stream (one entry; launch/events.py, stepview/events/)
    if options.events is not None:
        from stepview.launch.events import open_events_output

        opened = open_events_output(options.events, metrics)
        if isinstance(opened, int):
            if metrics is not None:
                metrics.close()
            return opened
        events = opened
    results = options.results
    chosen = results is None and default_results
    offset = 0  # where this run's records begin in a results file it appends to
    if results is not None and not chosen:
        with contextlib.suppress(OSError):
            offset = results.stat().st_size
    try:
        if chosen:
            results = default_results_path()
            results.parent.mkdir(parents=True, exist_ok=True)
        sinks = file_sinks(
            header,
            results=results,
            append_results=not chosen,
            record=options.record,
            rotate=options.record_rotate,
            keep=options.record_keep,
            annotate=annotate or insight.request_fields,
        )
    except OSError as exc:
        RunOutputs([], results, default_results=chosen, options=options, metrics=metrics).discard()
        if events is not None:
            events.close()
        return fail(f"cannot open output file: {exc}")
    if metrics is not None:
        sinks.append(metrics)
    if flight is not None:
        sinks.append(flight)
    if events is not None:  # a watched server's address is named in each event
        sinks.append(events.sink(server=options.attach))
    outputs = RunOutputs(sinks, results, default_results=chosen, options=options, metrics=metrics)
    outputs.results_offset = offset
    outputs.flight = flight
    return outputs


def serve_metrics(options: OwnOptions, insight: RunInsight) -> MetricsExporter | int:
    """The exporter of ``--metrics-port``, its endpoint serving (and named on stderr), or
    the exit code of a port that cannot be had. The driver's closing of its sinks stops it."""
    from stepview.metrics.exporter import MetricsExporter
    from stepview.metrics.server import DEFAULT_HOST, MetricsServer, MetricsUnavailable

    assert options.metrics_port is not None
    exporter = MetricsExporter(insight)
    try:
        server = MetricsServer(
            exporter.metrics.registry, options.metrics_host or DEFAULT_HOST, options.metrics_port
        )
    except MetricsUnavailable as exc:
        return fail(str(exc))
    exporter.on_close = server.stop
    notice(f"serving metrics at {server.url}")
    return exporter
