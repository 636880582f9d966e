"""``--events DEST``, as one entry: each request's life, the engine's steps and a fleet's
servers, as JSON events for programs (the stream itself is :mod:`stepview.events`).

Live (own engine, a watched server, a fleet: each plug-in server's driver gets a sink naming
its server, and the fleet's ``server`` events follow its roster) and from a replayed trace
(``--replay TRACE --events DEST --headless``: the trace's events, then exit). ``--events -``
writes standard output, which the front end then leaves to it; readers' lost events count in
``stepview_events_dropped_total`` when the exporter is served (it opens first: the
watching entries follow this one in the registry).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stepview.events.spec import (
    DEFAULT_BUFFER,
    DEFAULT_QUEUE,
    DEFAULT_STEP_RATE,
    FILE,
    HTTP,
    STDOUT,
    TOKEN_ENV,
    Destination,
    EventsSpec,
    parse_destination,
    parse_step_rate,
)
from stepview.outputs.entry import (
    HELP_GROUP,
    LIVE,
    Asked,
    Companions,
    Flag,
    FromTrace,
    Opened,
    Opening,
    Output,
    ServerOpening,
    Values,
)
from stepview.outputs.watching import METRICS, ServedMetrics
from stepview.run.flag_values import whole_number
from stepview.run.spec import FLEET, OWN, REPLAY, WATCH

if TYPE_CHECKING:
    from stepview.events.fleet import FleetEvents
    from stepview.events.output import EventsOutput
    from stepview.model.sink import SnapshotSink
    from stepview.model.source import SnapshotSource
    from stepview.model.targets import Roster

COMPANIONS = (
    "--events-step-rate",
    "--events-buffer",
    "--events-queue",
    "--events-token",
    "--events-remote",
    "--events-prompts",
)
"""The flags that go with ``--events``."""
SERVED_ONLY = ("--events-token", "--events-remote", "--events-buffer", "--events-queue")
"""Those of them that go with an ``http://`` destination alone."""


def _destination(text: str) -> Destination:
    try:
        return parse_destination(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _step_rate(text: str) -> float:
    try:
        return parse_step_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _spec(values: Values) -> EventsSpec | None:
    destinations = values["events"]
    if not destinations:
        return None
    token = values["events_token"] or os.environ.get(TOKEN_ENV) or None
    step_every = values["events_step_rate"]
    return EventsSpec(
        tuple(destinations),
        step_every=1.0 / DEFAULT_STEP_RATE if step_every is None else step_every,
        buffer=values["events_buffer"] or DEFAULT_BUFFER,
        queue=values["events_queue"] or DEFAULT_QUEUE,
        token=token,
        remote=bool(values["events_remote"]),
        prompts=bool(values["events_prompts"]),
        served_flags=tuple(
            flag for flag in SERVED_ONLY if values[flag.removeprefix("--").replace("-", "_")]
        ),
    )


def _refuse(spec: EventsSpec, asked: Asked) -> str | None:
    """The stream's own rules, past its companions and the sources it goes with."""
    kinds = [d.kind for d in spec.destinations]
    if kinds.count(HTTP) > 1:
        return "--events: one http:// stream at a time (any number of readers may follow it)"
    if kinds.count(STDOUT) > 1:
        return "--events -: once is enough"
    if HTTP not in kinds and spec.served_flags:
        verb = "goes" if len(spec.served_flags) == 1 else "go"
        return f"{', '.join(spec.served_flags)} {verb} with --events http://HOST:PORT"
    if STDOUT in kinds and not asked.headless:
        return "--events - writes to standard output: use --headless (the TUI draws there)"
    if asked.replay is not None:
        if not asked.headless:
            return "--events with --replay FILE needs --headless: the trace's events, then exit"
        if asked.summary:
            return "--events with --replay plays one trace's events: no --compare or --summary"
    if asked.rerun is not None:
        return "--events goes with a live run or a replay, not --rerun"
    return None


def _paths(spec: EventsSpec) -> Mapping[str, Path]:
    files = [d for d in spec.destinations if d.kind == FILE]
    return {
        "--events" if i == 0 else f"--events ({i + 1})": Path(d.path) for i, d in enumerate(files)
    }


class EventsStream(Opened):
    """The stream, open: a sink for the run's driver (or one per fleet server, sharing the
    destinations), the fleet's ``server`` events once its roster is known."""

    def __init__(self, output: EventsOutput, server: str | None) -> None:
        self.output = output
        self.owns_stdout = output.spec.on_stdout
        self.sinks = (output.sink(server=server),)  # its driver closing it closes the stream
        self.fleet: FleetEvents | None = None

    def sinks_for(self, server: ServerOpening) -> tuple[SnapshotSink, ...]:
        return (self.output.sink(server=server.address, owner=False),)

    def follow_fleet(
        self, roster: Roster, behind: Callable[[SnapshotSource], float | None]
    ) -> None:
        from stepview.events.fleet import FleetEvents

        self.fleet = FleetEvents(roster, self.output.outlets, behind)
        self.fleet.start()

    def discard(self) -> None:
        self.output.close()

    def close(self) -> None:
        if self.fleet is not None:
            self.fleet.stop()  # its last look: who is still there
        self.output.close()


def _open(spec: EventsSpec, say: Callable[[str], None]) -> EventsOutput | str:
    """The destinations, open (the served address named), or the line saying why not."""
    from stepview.events.output import EventsUnavailable, open_events

    try:
        output = open_events(spec)
    except EventsUnavailable as exc:
        return str(exc)
    if output.server is not None:
        say(f"serving events at {output.server.url}")
    return output


def open_stream(spec: EventsSpec, opening: Opening) -> Opened | str:
    """The stream of a live run; its readers' losses counted by the exporter, if served."""
    output = _open(spec, opening.say)
    if isinstance(output, str):
        return output
    metrics = opening.opened.get(METRICS.name)
    if isinstance(metrics, ServedMetrics):
        output.count_dropped = metrics.exporter.metrics.events_dropped.inc
    return EventsStream(output, opening.spec.watch.name)


def replay_stream(spec: EventsSpec, source: FromTrace) -> list[str]:
    """Every event of the trace, handed over; why not, if it could not be.

    Its times are the recording's: ``time`` is the trace's start (its header's ``created``)
    plus the run's clock. Served over HTTP, the whole trace is kept for readers, and the run
    ends once a reader has connected and every reader has had every event (or on a signal).
    """
    from stepview.events.derive import EventDeriver, events_of

    trace = source.trace
    start = _started(trace.header.get("created"))
    deriver = EventDeriver(
        step_every=spec.step_every,
        prompts=spec.prompts,
        server=trace.info.attached or None,
        wall=lambda snapshot: start + snapshot.clock,
    )
    events = list(events_of(trace.snapshots, deriver))
    if spec.served is not None:  # every event of the trace stays for its readers
        spec = replace(spec, buffer=max(spec.buffer, len(events)))
    output = _open(spec, source.say)
    if isinstance(output, str):
        return [output]
    try:
        for outlet in output.outlets:
            outlet.put(events)
        if output.server is not None:
            source.say(f"{len(events)} events of {source.path} ready; waiting for a reader")
            with source.until_signal() as stop:
                output.wait_for_readers(stop)
    finally:
        output.close()
    error = output.error()
    return [] if error is None else [error]


def _started(created: object) -> float:
    """The trace's start on the wall clock (its header's ``created``), or now."""
    if isinstance(created, str):
        try:
            return datetime.fromisoformat(created).timestamp()
        except ValueError:
            pass
    return time.time()


def _flag(name: str, **options: Any) -> Flag:
    return Flag(name, HELP_GROUP, options, at_least_one=options.get("type") is whole_number)


EVENTS: Output[EventsSpec] = Output(
    name="events",
    flags=(
        _flag(
            "--events",
            action="append",
            type=_destination,
            metavar="DEST",
            help="where the events go: - (standard output, with --headless), a file (JSON "
            "lines, rotated past 256 MB, 4 files kept), or http://127.0.0.1:PORT (Server-Sent "
            "Events at /events, for curl -N or any HTTP client; Last-Event-ID resumes); may be "
            "given more than once",
        ),
        _flag(
            "--events-step-rate",
            type=_step_rate,
            metavar="R",
            help="step events per second at most, or 'all' for every engine step "
            f"(default: {DEFAULT_STEP_RATE:g})",
        ),
        _flag(
            "--events-buffer",
            type=whole_number,
            metavar="N",
            help="events the HTTP stream keeps for readers that reconnect "
            f"(default: {DEFAULT_BUFFER})",
        ),
        _flag(
            "--events-queue",
            type=whole_number,
            metavar="N",
            help="events an HTTP reader may fall behind before it loses the oldest (told by a "
            "'dropped' event); after losing N in all it is disconnected "
            f"(default: {DEFAULT_QUEUE})",
        ),
        _flag(
            "--events-token",
            metavar="TOKEN",
            help="readers of the HTTP stream must send Authorization: Bearer TOKEN (or set "
            f"{TOKEN_ENV}, which keeps it off the process list)",
        ),
        _flag(
            "--events-remote",
            action="store_true",
            default=None,
            help="serve the HTTP stream on an address other machines can reach (default: "
            "loopback only, as the plug-in's records)",
        ),
        _flag(
            "--events-prompts",
            action="store_true",
            default=None,
            help="put each prompt's text in its 'arrived' event (default: lengths only)",
        ),
    ),
    kind=LIVE,
    sources=frozenset({OWN, WATCH, FLEET, REPLAY}),
    spec=_spec,
    companions=tuple(  # one each: the message names the flag given, as ever
        Companions((flag,), "--events DEST", "events") for flag in COMPANIONS
    ),
    refuse=_refuse,
    paths=_paths,
    open=open_stream,
    from_trace=replay_stream,
    group=(
        "event stream",
        "Each request's life (arrived, waiting and why, scheduled, first token, preempted, "
        "resumed, finished, aborted), the engine's steps and a fleet's servers, as JSON "
        "events for programs (schema: docs/events.md), in every live mode and from a replay.",
    ),
)
