"""The ``--events`` group: a stream of what changes, for programs (routers, autoscalers).

Kept in a module of its own so the stream is one piece to register: its flags
(:func:`add_events_args`), the :class:`~stepview.events.spec.EventsSpec` they make
(:func:`take_events_spec`, which takes its values off the parsed namespace, so
:class:`~stepview.cli.args.OwnOptions` holds one field for all of them) and what they cannot
go with (:func:`events_conflict`).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Protocol

from stepview.cli.attach import is_metrics_address
from stepview.events.spec import (
    DEFAULT_BUFFER,
    DEFAULT_QUEUE,
    DEFAULT_STEP_RATE,
    HTTP,
    STDOUT,
    TOKEN_ENV,
    EventsSpec,
    parse_destination,
    parse_step_rate,
)

_COMPANIONS = (
    "events_step_rate",
    "events_buffer",
    "events_queue",
    "events_token",
    "events_remote",
    "events_prompts",
)


def _step_rate(text: str) -> float:
    try:
        return parse_step_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def add_events_args(parser: argparse.ArgumentParser) -> None:
    """Add the ``event stream`` group to ``parser``."""
    group = parser.add_argument_group(
        "event stream",
        "Each request's life (arrived, waiting and why, scheduled, first token, preempted, "
        "resumed, finished, aborted), the engine's steps and a fleet's servers, as JSON "
        "events for programs (schema: docs/events.md), in every live mode and from a replay.",
    )
    group.add_argument(
        "--events",
        action="append",
        metavar="DEST",
        help="where the events go: - (standard output, with --headless), a file (JSON "
        "lines, rotated past 256 MB, 4 files kept), or http://127.0.0.1:PORT (Server-Sent "
        "Events at /events, for curl -N or any HTTP client; Last-Event-ID resumes); may be "
        "given more than once",
    )
    group.add_argument(
        "--events-step-rate",
        type=_step_rate,
        metavar="R",
        help=f"step events per second at most, or 'all' for every engine step "
        f"(default: {DEFAULT_STEP_RATE:g})",
    )
    group.add_argument(
        "--events-buffer",
        type=_count,
        metavar="N",
        help=f"events the HTTP stream keeps for readers that reconnect (default: {DEFAULT_BUFFER})",
    )
    group.add_argument(
        "--events-queue",
        type=_count,
        metavar="N",
        help="events an HTTP reader may fall behind before it loses the oldest (told by a "
        f"'dropped' event); after losing N in all it is disconnected (default: {DEFAULT_QUEUE})",
    )
    group.add_argument(
        "--events-token",
        metavar="TOKEN",
        help=f"readers of the HTTP stream must send Authorization: Bearer TOKEN (or set "
        f"{TOKEN_ENV}, which keeps it off the process list)",
    )
    group.add_argument(
        "--events-remote",
        action="store_true",
        default=None,
        help="serve the HTTP stream on an address other machines can reach (default: "
        "loopback only, as the plug-in's records)",
    )
    group.add_argument(
        "--events-prompts",
        action="store_true",
        default=None,
        help="put each prompt's text in its 'arrived' event (default: lengths only)",
    )


def take_events_spec(namespace: argparse.Namespace) -> EventsSpec | None:
    """The spec the ``--events`` flags make, their values taken off ``namespace`` (which then
    holds ``events`` alone); ``ValueError`` for a destination that is not one. Companion
    flags without ``--events`` are kept as given for :func:`events_conflict` to name."""
    values = {name: getattr(namespace, name) for name in _COMPANIONS}
    for name in _COMPANIONS:
        delattr(namespace, name)
    given = namespace.events
    namespace.event_flags = tuple(
        f"--{name.replace('_', '-')}" for name, value in values.items() if value is not None
    )
    if not given:
        return None
    destinations = tuple(parse_destination(text) for text in given)
    token = values["events_token"]
    if token is None:
        token = os.environ.get(TOKEN_ENV) or None
    step_every = values["events_step_rate"]
    return EventsSpec(
        destinations,
        step_every=1.0 / DEFAULT_STEP_RATE if step_every is None else step_every,
        buffer=values["events_buffer"] or DEFAULT_BUFFER,
        queue=values["events_queue"] or DEFAULT_QUEUE,
        token=token,
        remote=bool(values["events_remote"]),
        prompts=bool(values["events_prompts"]),
    )


class _Flags(Protocol):
    """What :func:`events_conflict` reads of the parsed flags (:class:`~stepview.cli.args.
    OwnOptions`, which imports this module: named by shape, not by import)."""

    @property
    def events(self) -> EventsSpec | None: ...
    @property
    def event_flags(self) -> tuple[str, ...]: ...
    @property
    def headless(self) -> bool: ...
    @property
    def replay(self) -> Path | None: ...
    @property
    def compare(self) -> Path | None: ...
    @property
    def summary(self) -> bool: ...
    @property
    def rerun(self) -> Path | None: ...
    @property
    def attach(self) -> str | None: ...
    @property
    def is_fleet(self) -> bool: ...


def events_conflict(own: _Flags) -> str | None:
    """Why the ``--events`` flags cannot be used as given, if they cannot."""
    spec = own.events
    if spec is None:
        if own.event_flags:
            verb = "goes" if len(own.event_flags) == 1 else "go"
            return f"{', '.join(own.event_flags)} {verb} with --events DEST"
        return None
    kinds = [d.kind for d in spec.destinations]
    if kinds.count(HTTP) > 1:
        return "--events: one http:// stream at a time (any number of readers may follow it)"
    if kinds.count(STDOUT) > 1:
        return "--events -: once is enough"
    if HTTP not in kinds:
        served_only = [
            flag
            for flag in ("--events-token", "--events-remote", "--events-buffer", "--events-queue")
            if flag in own.event_flags
        ]
        if served_only:
            verb = "goes" if len(served_only) == 1 else "go"
            return f"{', '.join(served_only)} {verb} with --events http://HOST:PORT"
    if STDOUT in kinds and not own.headless:
        return "--events - writes to standard output: use --headless (the TUI draws there)"
    if own.replay is not None:
        if not own.headless:
            return "--events with --replay FILE needs --headless: the trace's events, then exit"
        if own.compare is not None or own.summary:
            return "--events with --replay plays one trace's events: no --compare or --summary"
    if own.rerun is not None:
        return "--events goes with a live run or a replay, not --rerun"
    if is_metrics_address(own.attach) and not own.is_fleet:
        return (
            "--events needs the plug-in's records of each request: attach to the server's "
            "STEPVIEW_PUBLISH address (an http:// server's /metrics has no requests)"
        )
    return None
