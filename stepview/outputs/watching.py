"""What a run left watching serves or keeps: the Prometheus exporter (``--metrics-port``) and
the flight recorder (``--flight-recorder``).

Both watch a running engine (a replay has none), and both claim something before the engine
starts that can be refused (a port; a folder to write in): one line and exit 2 then, not a
lost recording or an endpoint missing at the moment of the incident.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stepview.outputs.entry import (
    ENGINE,
    HELP_LONG_RUN,
    HELP_SERVED,
    LIVE,
    Companions,
    Flag,
    Opened,
    Opening,
    Output,
    Say,
    Values,
)
from stepview.outputs.paths import output_path_problem
from stepview.run.flag_values import duration, port, whole_number
from stepview.run.spec import OWN, RERUN, WATCH

if TYPE_CHECKING:
    from stepview.metrics.exporter import MetricsExporter
    from stepview.model.engine_api import LinkState
    from stepview.model.flight import FlightDump
    from stepview.trace.flight import FlightRecorder

FLIGHT_MAX_MB = 256
"""The flight recorder's ring, at most (``--flight-max-mb``)."""


@dataclass(frozen=True, slots=True)
class MetricsSpec:
    """``--metrics-port`` (0: a free one) and ``--metrics-host`` (``None``: loopback)."""

    port: int
    host: str | None = None


class ServedMetrics(Opened):
    """The exporter, serving; the driver's closing of its sinks stops the server."""

    def __init__(self, exporter: MetricsExporter) -> None:
        self.sinks = (exporter,)
        self.exporter = exporter

    def follow_link(self, link: Callable[[], LinkState | None]) -> None:
        """How far behind a watched server the view is, and which of its ranks are reached."""
        self.exporter.link = link

    def discard(self) -> None:
        self.exporter.close()


def serve_metrics(spec: MetricsSpec, opening: Opening) -> Opened | str:
    """The exporter, its endpoint serving (and named on stderr), or why the port cannot be
    had."""
    from stepview.metrics.exporter import MetricsExporter
    from stepview.metrics.server import DEFAULT_HOST, MetricsServer, MetricsUnavailable

    exporter = MetricsExporter(opening.insight)
    try:
        server = MetricsServer(exporter.metrics.registry, spec.host or DEFAULT_HOST, spec.port)
    except MetricsUnavailable as exc:
        return str(exc)
    exporter.on_close = server.stop
    opening.say(f"serving metrics at {server.url}")
    return ServedMetrics(exporter)


def _metrics_spec(values: Values) -> MetricsSpec | None:
    port_ = values["metrics_port"]
    return None if port_ is None else MetricsSpec(port_, values["metrics_host"])


METRICS: Output[MetricsSpec] = Output(
    name="metrics",
    flags=(
        Flag(
            "--metrics-port",
            HELP_SERVED,
            {
                "type": port,
                "metavar": "PORT",
                "help": "serve Prometheus metrics at http://HOST:PORT/metrics while the engine "
                "runs (live or --attach, TUI or --headless): waiting requests by stepview's "
                "reason, preemptions, the step's token budget, the oldest wait, alerts, how far "
                "the view is behind; 0 picks a free port (printed on stderr)",
            },
        ),
        Flag(
            "--metrics-host",
            HELP_SERVED,
            {
                "metavar": "HOST",
                "help": "with --metrics-port: the address to listen on (default: 127.0.0.1, this "
                "machine only; 0.0.0.0 for every interface: the endpoint has no authentication)",
            },
        ),
    ),
    kind=LIVE,
    sources=frozenset({OWN, WATCH, RERUN}),
    needs=frozenset({ENGINE}),
    spec=_metrics_spec,
    companions=(Companions(("--metrics-host",), "--metrics-port PORT", "metrics_port"),),
    open=serve_metrics,
)


@dataclass(frozen=True, slots=True)
class FlightSpec:
    """``--flight-recorder DURATION``: its ``folder`` (``None``: stepview's data directory)
    and the memory its ring may take, in MB."""

    duration: float
    folder: str | None = None
    max_mb: int = FLIGHT_MAX_MB

    def where(self) -> Path:
        """``--flight-dir``, or ``flight/`` in stepview's data directory."""
        if self.folder is not None:
            return Path(self.folder).expanduser()
        from platformdirs import user_data_dir

        return Path(user_data_dir("stepview")) / "flight"


class FlightOutput(Opened):
    """The recorder, ready (the run's modes reach it for ``SIGUSR1``, the F key and the
    engine's stacks); at the end it names its recordings."""

    def __init__(self, recorder: FlightRecorder) -> None:
        self.sinks = (recorder,)
        self.recorder = recorder

    def report(self, say: Say) -> None:
        note = recordings_note(self.recorder)
        if note is not None:
            say(note)


def open_flight(spec: FlightSpec, opening: Opening) -> Opened | str:
    """The recorder, its folder made and writable; or why not. Headless runs name each
    recording on stderr as it is written (the TUI in its status bar: stderr is the screen)."""
    from stepview.trace.flight import FlightRecorder

    folder = spec.where()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot make the flight recorder's folder {folder}: {exc.strerror or exc}"
    problem = output_path_problem(folder / ".stepview-write-check")
    if problem is not None:
        return f"the flight recorder cannot write in {folder}: {problem}"

    def say_dump(dump: FlightDump) -> None:
        opening.say(dump_line(dump))

    recorder = FlightRecorder(
        folder,
        spec.duration,
        spec.max_mb << 20,
        opening.header,
        on_dump=say_dump if opening.spec.front.headless else None,
    )
    return FlightOutput(recorder)


def dump_line(dump: FlightDump) -> str:
    """The line said per recording written, extended or complete, and when the engine cores'
    stacks were added to it."""
    if dump.stacks is not None:
        return f"flight recording {dump.path}: {dump.stacks}"
    if not dump.open:
        return f"flight recording complete: {dump.path}"
    if dump.extended:
        return f"flight recording goes on ({dump.why}): {dump.path}"
    return f"flight recording ({dump.why}) in {dump.path}"


def recordings_note(recorder: FlightRecorder | None) -> str | None:
    """At the end of a run: how many recordings it wrote and the latest one."""
    if recorder is None or not recorder.written or recorder.last is None:
        return None
    count = recorder.written
    plural = "s" if count > 1 else ""
    return f"{count} flight recording{plural} in {recorder.folder} (latest: {recorder.last.path})"


def _flight_spec(values: Values) -> FlightSpec | None:
    wanted = values["flight_recorder"]
    if wanted is None:
        return None
    return FlightSpec(wanted, values["flight_dir"], values["flight_max_mb"])


FLIGHT: Output[FlightSpec] = Output(
    name="flight",
    flags=(
        Flag(
            "--flight-recorder",
            HELP_LONG_RUN,
            {
                "type": duration,
                "metavar": "DURATION",
                "help": "keep the last DURATION (e.g. 10m) of steps in memory and write them as "
                "a trace when an alert is raised, on SIGUSR1 or on the F key (shift+f); the trace "
                "goes on for DURATION after the last alert. Replay it with --replay",
            },
        ),
        Flag(
            "--flight-dir",
            HELP_LONG_RUN,
            {
                "metavar": "DIR",
                "help": "with --flight-recorder: where its traces go (default: stepview's data "
                "directory, flight/)",
            },
        ),
        Flag(
            "--flight-max-mb",
            HELP_LONG_RUN,
            {
                "type": whole_number,
                "metavar": "MB",
                "default": FLIGHT_MAX_MB,
                "help": "with --flight-recorder: memory its steps may take, at most (default: "
                "%(default)s); a busier server keeps less than DURATION, and the trace says so",
            },
            at_least_one=True,
        ),
    ),
    kind=LIVE,
    sources=frozenset({OWN, WATCH, RERUN}),
    needs=frozenset({ENGINE}),
    spec=_flight_spec,
    companions=(
        Companions(
            ("--flight-dir", "--flight-max-mb"), "--flight-recorder DURATION", "flight_recorder"
        ),
    ),
    open=open_flight,
)

ENTRIES: tuple[Output[Any], ...] = (METRICS, FLIGHT)
"""This module's entries, in the registry's order (conflict messages name the port first)."""
