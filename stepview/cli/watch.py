"""The flags of a stepview left running beside a server: bounds, rotation, flight recorder,
metrics (the ``leaving it running`` group of ``stepview --help``).

Kept apart from :mod:`stepview.cli.args` (which adds this group to its parser) because they
share their value types: sizes (``100M``), durations (``10m``) and ports, each refused with a
message naming the flag, as argparse does for a ``type=``.
"""

from __future__ import annotations

import argparse
import math
import re

from stepview.model.recent import KEEP_FINISHED
from stepview.run.spec import FLIGHT_MAX_MB

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([kmg]?)b?\s*", re.IGNORECASE)
_SECONDS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?)\s*(s|sec|m|min|h|d)?\s*", re.IGNORECASE)


def whole_number(text: str) -> int:
    """A whole number of at least 0 (a negative ``--admit-per-step`` would admit nothing)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def port(text: str) -> int:
    """A TCP port, 0 (the system picks a free one) to 65535."""
    value = whole_number(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be 0 to 65535, got {value}")
    return value


def size(text: str) -> int:
    """Bytes: ``500000``, ``64K``, ``100M``, ``2G`` (binary units, a trailing ``B`` allowed)."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"must be a size such as 100M or 2G, got {text!r}")
    value = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if value < 1 << 16:
        raise argparse.ArgumentTypeError(f"must be 64K or more, got {text!r}")
    return value


def duration(text: str) -> float:
    """Seconds: ``90``, ``90s``, ``10m``, ``2h``, ``1d``; more than 0."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"must be a duration such as 90s, 10m or 2h, got {text!r}")
    value = float(match.group(1)) * _SECONDS[(match.group(2) or "").lower()]
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text!r}")
    return value


def add_watch_args(parser: argparse.ArgumentParser) -> None:
    """The ``leaving it running`` group."""
    group = parser.add_argument_group(
        "leaving it running",
        "For a watch that runs for weeks (nohup, a systemd unit): memory stays within the "
        "bounds below, whatever the run's length.",
    )
    group.add_argument(
        "--keep-finished",
        type=int,
        metavar="N",
        default=KEEP_FINISHED,
        help="finished requests kept in memory for the panes and the latency panel, 1 or "
        "more (default: %(default)s); every one is in the results file as it finishes",
    )
    group.add_argument(
        "--record-rotate",
        type=size,
        metavar="SIZE",
        help="with --record FILE: start a new file once it holds SIZE (e.g. 500M): FILE, then "
        "FILE with .2, .3... before its suffix; each replays on its own and names the ones "
        "before it",
    )
    group.add_argument(
        "--record-keep",
        type=int,
        metavar="N",
        help="with --record-rotate: keep the newest N files, removing older ones (default: all)",
    )
    group.add_argument(
        "--flight-recorder",
        type=duration,
        metavar="DURATION",
        help="keep the last DURATION (e.g. 10m) of steps in memory and write them as a "
        "trace when an alert is raised, on SIGUSR1 or on the F key (shift+f); the trace "
        "goes on for DURATION after the last alert. Replay it with --replay",
    )
    group.add_argument(
        "--flight-dir",
        metavar="DIR",
        help="with --flight-recorder: where its traces go (default: stepview's data "
        "directory, flight/)",
    )
    group.add_argument(
        "--flight-max-mb",
        type=whole_number,
        metavar="MB",
        default=FLIGHT_MAX_MB,
        help="with --flight-recorder: memory its steps may take, at most (default: "
        "%(default)s); a busier server keeps less than DURATION, and the trace says so",
    )
    group.add_argument(
        "--stuck-after",
        type=duration,
        metavar="SECONDS",
        help="raise a stuck alert when a request has waited longer than this (e.g. 300 or "
        "5m; default: never), as when a server's /health stays green while one waits",
    )
    group.add_argument(
        "--metrics-port",
        type=port,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics while the engine runs "
        "(live or --attach, TUI or --headless): waiting requests by stepview's reason, "
        "preemptions, the step's token budget, the oldest wait, alerts, how far the view "
        "is behind; 0 picks a free port (printed on stderr)",
    )
    group.add_argument(
        "--metrics-host",
        metavar="HOST",
        help="with --metrics-port: the address to listen on (default: 127.0.0.1, this "
        "machine only; 0.0.0.0 for every interface: the endpoint has no authentication)",
    )
