"""The flags of ``--attach``: which server to watch, and how (the ``attach`` flags of
``stepview --help``).

Kept apart from :mod:`stepview.cli.args` (which adds them to its parser's group) so that the
ways of watching a server, through the plug-in's records (``tcp://``, ``ipc://``) or the
server's ``/metrics`` alone (``http://``), have their flags and their value types together.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stepview.files.targets_file import TargetsFileError, read_attach_file
from stepview.model.address import (
    Discovery,
    WatchAddress,
    is_prometheus,
    prometheus_discovery,
    watch_address,
)
from stepview.run.flag_values import whole_number
from stepview.run.spec import ATTACH_NICE, SCRAPE_INTERVAL_S, WINDOW_S

MAX_NICE = 19  # the lowest CPU priority Linux and macOS give


class AddressError(ValueError):
    """An ``--attach`` server that cannot be watched: one line, ``--attach:`` first, the exit
    code of a usage error (said as every launcher said it, not as argparse's errors)."""


def attach_fleet(
    given: Sequence[str] | None, file: Path | None
) -> tuple[tuple[str, ...], tuple[Discovery, ...]]:
    """Every server to watch: each ``--attach`` (a comma list counts as several), then the
    lines of a plain ``--attach-file`` (blank lines and ``#`` comments skipped), without
    repeats; and where more are listed, followed while watching (``prometheus://`` given, an
    ``--attach-file`` in Prometheus' file_sd format). More than one server, or any listing, is
    a fleet. ``ValueError`` with the flag's name first when one cannot be used. Each server's
    address is parsed by :func:`watched_servers`, once the flags are known to go together."""
    given_parts = [part.strip() for value in given or () for part in value.split(",")]
    if any(not part for part in given_parts):
        raise ValueError("--attach: an empty address in a comma list")
    addresses: list[str] = []
    discoveries: list[Discovery] = []
    for part in given_parts:
        if is_prometheus(part):
            try:
                discoveries.append(prometheus_discovery(part))
            except ValueError as exc:
                raise ValueError(f"--attach: {exc}") from None
        else:
            addresses.append(part)
    if file is not None:
        try:
            listed = read_attach_file(file)
        except TargetsFileError as exc:
            raise ValueError(f"--attach-file: {exc}") from None
        addresses += listed.addresses
        if listed.discovery is not None:
            discoveries.append(listed.discovery)
    unique: dict[str, Discovery] = {}
    for discovery in discoveries:
        unique.setdefault(discovery.name, discovery)
    return tuple(dict.fromkeys(addresses)), tuple(unique.values())


def watched_servers(
    fleet: Sequence[str], ranks: tuple[int, ...] | None
) -> tuple[WatchAddress, ...]:
    """Each server's address parsed, once, into what it names (a plug-in's records with
    ``ranks``, or a ``/metrics`` page); :class:`AddressError` for the first that cannot be
    watched (a rank past the last port included). Judged after the flags' conflicts, as the
    launchers always judged it."""
    try:
        return tuple(watch_address(text, ranks or (0,)) for text in fleet)
    except ValueError as exc:
        raise AddressError(f"--attach: {exc}") from None


def _niceness(text: str) -> int:
    """How much lower to run stepview's CPU priority: 0 (as it is) to 19 (the lowest)."""
    value = whole_number(text)
    if value > MAX_NICE:
        raise argparse.ArgumentTypeError(f"must be 0 to {MAX_NICE}, got {value}")
    return value


def _ranks(text: str) -> tuple[int, ...]:
    """``N`` (ranks 0 to N-1) or a comma-separated list of ranks (``0,2``)."""
    try:
        if "," not in text:
            count = int(text)
            if count < 1:
                raise argparse.ArgumentTypeError(f"must be 1 or more, got {count}")
            return tuple(range(count))
        ranks = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a count (2) or a list of ranks (0,1), got {text!r}"
        ) from None
    if any(rank < 0 for rank in ranks) or len(set(ranks)) != len(ranks):
        raise argparse.ArgumentTypeError(f"ranks must be distinct and 0 or more, got {text!r}")
    return ranks


def _seconds(low: float) -> Any:
    """An argparse ``type``: a finite number of seconds, at least ``low``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
        if not math.isfinite(value) or value < low:
            raise argparse.ArgumentTypeError(f"must be {low:g} s or more, got {text!r}")
        return value

    return parse


def add_attach_args(group: Any) -> None:
    """Add the attach flags to ``group`` (an argparse parser or group)."""
    group.add_argument(
        "--attach",
        metavar="ADDRESS",
        action="append",
        help="watch a running vLLM server instead of starting an engine: ADDRESS is the "
        "STEPVIEW_PUBLISH address (tcp://HOST:PORT or ipc://PATH) of a server started with "
        "--scheduler-cls stepview.engine.scheduler_plugin.StepviewScheduler, or any server's "
        "own http://HOST:PORT (its /metrics: counters, latency percentiles, no requests), "
        "or prometheus://HOST:PORT[?job=NAME] (the vLLM servers a Prometheus scrapes, or that "
        "job's targets, each watched through its /metrics with its labels, and followed as "
        "they come and go); takes no engine flags; pause and single step only hold the "
        "view, the server runs on; with --headless, print what the server finishes (http: "
        "one JSON line per scrape) until Ctrl+C; repeated, or a comma list: watch several "
        "servers (mixed kinds) on the fleet screen, Enter for one server's full view, Esc "
        "back (--headless: one JSON line per server per --scrape-interval, its address and "
        "labels on each)",
    )
    group.add_argument(
        "--attach-file",
        type=Path,
        metavar="FILE",
        help="the servers to watch: one --attach ADDRESS per line (# comments allowed), read "
        'once; or Prometheus\' file_sd targets, JSON or YAML ([{"targets": ["HOST:PORT"], '
        '"labels": {...}}]), followed while watching: servers added join the fleet, servers '
        "removed leave it; with any --attach given: more than one server, or a file_sd "
        "file, is a fleet",
    )
    group.add_argument(
        "--attach-ranks",
        type=_ranks,
        metavar="N|LIST",
        default=None,
        help="with --attach: the server's data-parallel ranks to watch, a count (2: ranks 0 "
        "and 1) or a list (0,2); rank r publishes on ADDRESS's port + r (default: 1)",
    )
    group.add_argument(
        "--api",
        metavar="URL",
        help="with --attach: the server's OpenAI-compatible API (http://HOST:PORT); new "
        "prompts are sent to its /v1/completions (without it, adding is disabled), other "
        "clients' prompts and completions are shown as text through its /detokenize",
    )
    group.add_argument(
        "--api-key",
        metavar="KEY",
        help="with --api or an http:// --attach: the key the server was started with (its "
        "--api-key); without it stepview reads VLLM_API_KEY, then OPENAI_API_KEY "
        "(better: a flag shows in ps); never printed or recorded",
    )
    group.add_argument(
        "--nice",
        type=_niceness,
        metavar="N",
        default=None,
        help=f"with --attach: lower stepview's CPU priority by N, 0 to {MAX_NICE} (default: "
        f"{ATTACH_NICE}), so that on a machine it shares with the server the view falls "
        "behind, not the server",
    )
    group.add_argument(
        "--scrape-interval",
        type=_seconds(0.1),
        metavar="SECONDS",
        default=SCRAPE_INTERVAL_S,
        help="with --attach http://HOST:PORT: read the server's /metrics every SECONDS "
        "(default: %(default)g); --headless prints a line each time",
    )
    group.add_argument(
        "--window",
        type=_seconds(1.0),
        metavar="SECONDS",
        default=WINDOW_S,
        help="with --attach http://HOST:PORT: the latency percentiles and finished counts "
        "cover the last SECONDS (default: %(default)g)",
    )
    group.add_argument(
        "--kv-events",
        metavar="ADDRESS",
        help="with --attach http://HOST:PORT: also subscribe to the KV-cache events the server "
        "publishes (its --kv-events-config endpoint, e.g. tcp://HOST:5557) and show block churn, "
        "resident blocks and prefix-cache reuse from them",
    )
