"""The output registry: every output stepview has, one entry each, and what follows from
the entries: the flags, their values, the rules between them, the files to check.

:data:`OUTPUTS` is the one list. The command line builds its output flags from it
(:func:`add_output_flags`, :func:`add_output_groups`), takes their values apart
(:func:`take_output_values`), refuses what the entries refuse (:func:`output_conflict`, and
the lists its generic rules name: :func:`one_server_flags`, :func:`engine_flags`,
:func:`trace_exports_given`) and makes each asked-for output's spec
(:func:`chosen_outputs`); the modes open, finish and write from a trace what the run asked
for (:mod:`stepview.launch.outputs`, :mod:`stepview.launch.export`), in this order.

The order is the sinks' order (the driver feeds them in it), ``--help``'s within each place,
and the order messages name flags in. Outputs open (and their files are checked) in
:func:`opening_order`: the live ones from the last to the first, so that what claims a port or
a folder (the watching outputs, last) is had before any file is made and a port in use leaves
no file behind; then the rest.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stepview.outputs import exports, printing, run_files, spans, watching
from stepview.outputs.entry import (
    ENGINE,
    HELP_GROUP,
    LIVE,
    STEPS,
    WALL_CLOCK,
    Asked,
    Flag,
    Output,
    Values,
)
from stepview.outputs.events import EVENTS
from stepview.run.spec import WATCH, Outputs

OUTPUTS: tuple[Output[Any], ...] = (
    *printing.ENTRIES,
    *run_files.ENTRIES,
    *spans.ENTRIES,
    EVENTS,  # before the exporter: opened after it, its readers' losses counted there
    *watching.ENTRIES,
    *exports.ENTRIES,
)


def _flags() -> Iterator[Flag]:
    for entry in OUTPUTS:
        yield from entry.flags


def add_output_flags(group: argparse._ArgumentGroup, place: str) -> None:
    """Add to ``group`` the output flags ``--help`` shows at ``place``, in registry order."""
    for flag in _flags():
        if flag.place == place:
            group.add_argument(flag.name, **flag.options)


def add_output_groups(parser: argparse.ArgumentParser) -> None:
    """The ``--help`` groups of outputs that have one of their own (after the command's)."""
    for entry in OUTPUTS:
        if entry.group is not None:
            title, description = entry.group
            group = parser.add_argument_group(title, description)
            add_output_flags(group, HELP_GROUP)


def take_output_values(namespace: argparse.Namespace) -> dict[str, Any]:
    """The output flags' values, taken off ``namespace`` (which keeps the other flags)."""
    values = {}
    for flag in _flags():
        values[flag.dest] = getattr(namespace, flag.dest)
        delattr(namespace, flag.dest)
    return values


def count_problem(values: Values) -> str | None:
    """A count given below 1 (``--record-keep 0``), as argparse words its errors."""
    for flag in _flags():
        value = values[flag.dest]
        if flag.at_least_one and value is not None and value < 1:
            return f"argument {flag.name}: must be 1 or more, got {value}"
    return None


def output_conflict(values: Values, asked: Asked) -> str | None:
    """The first rule of an entry the flags break: a flag that needs ``--headless``,
    companions without the flag they go with, the entry's own rules; ``None`` if none."""
    for entry in OUTPUTS:
        if entry.headless_only and entry.given(values) and not asked.headless:
            return f"{entry.flag.name} needs --headless"
    by_name = {flag.name: flag for flag in _flags()}
    for entry in OUTPUTS:
        for companions in entry.companions:
            flags = [by_name[name] for name in companions.flags]
            if values[companions.requires] is None and any(
                values[flag.dest] != flag.default for flag in flags
            ):
                verb = "goes" if len(flags) == 1 else "go"
                return f"{' and '.join(companions.flags)} {verb} with {companions.needs}"
    for entry in OUTPUTS:
        spec = entry.spec(values) if entry.given(values) else None
        if spec is not None and entry.refuse is not None:
            problem = entry.refuse(spec, asked)
            if problem is not None:
                return problem
    return _not_alone(values, asked)


def _not_alone(values: Values, asked: Asked) -> str | None:
    """An output that goes alone from a trace, given with something beside it."""
    if asked.replay is None:
        return None
    for entry in OUTPUTS:
        if not (entry.alone_from_trace and entry.given(values)):
            continue
        others = [
            other
            for other in OUTPUTS
            if other is not entry and other.from_trace is not None and other.given(values)
        ]
        if asked.summary or asked.compare is not None or others:
            return f"{entry.flag.name} with --replay: no --summary, --compare or exports beside it"
    return None


def one_server_flags(values: Values, kind: str, lacking: str) -> list[tuple[str, object]]:
    """The flags of the ``kind`` outputs that record one watched server's requests but a
    ``lacking`` source cannot give (a fleet, a ``/metrics`` page), with their values
    (``None``: not given)."""
    return [
        (entry.flag.name, values[entry.flag.dest] if entry.given(values) else None)
        for entry in OUTPUTS
        if entry.kind == kind and WATCH in entry.sources and lacking not in entry.sources
    ]


def engine_flags(values: Values) -> list[str]:
    """The flags given of outputs that watch a running engine (refused with a replay)."""
    return [entry.flag.name for entry in OUTPUTS if ENGINE in entry.needs and entry.given(values)]


def trace_exports_given(values: Values) -> bool:
    """Whether an output written from a trace (without the TUI) was asked for."""
    return any(entry.from_trace is not None and entry.given(values) for entry in OUTPUTS)


def chosen_outputs(values: Values) -> dict[str, object]:
    """Each output's spec, by entry name, for those the flags ask for."""
    chosen = {}
    for entry in OUTPUTS:
        spec = entry.spec(values)
        if spec is not None:
            chosen[entry.name] = spec
    return chosen


def opening_order() -> list[Output[Any]]:
    """The entries in the order they open: the live ones last to first, then the others."""
    live = [entry for entry in OUTPUTS if entry.kind == LIVE]
    return [*reversed(live), *(entry for entry in OUTPUTS if entry.kind != LIVE)]


def output_paths(outputs: Outputs) -> dict[str, Path]:
    """The files the chosen outputs write, by how a message names each, in opening order."""
    named: dict[str, Path] = {}
    for entry in opening_order():
        spec = entry.of(outputs)
        if spec is not None and entry.paths is not None:
            named.update(entry.paths(spec))
    return named


def needed(outputs: Outputs, need: str) -> bool:
    """Whether a chosen output needs ``need`` of the run."""
    return any(need in entry.needs and entry.of(outputs) is not None for entry in OUTPUTS)


def keeps_steps(outputs: Outputs) -> bool:
    """Whether a chosen output needs every step's figures at the end (the insight keeps
    them then)."""
    return needed(outputs, STEPS)


def keeps_epoch(outputs: Outputs) -> bool:
    """Whether a chosen output needs the run's epoch (noted then, and in trace headers)."""
    return needed(outputs, WALL_CLOCK)


def trace_outputs(outputs: Outputs) -> list[tuple[Output[Any], object]]:
    """The chosen outputs written from a trace, with their specs, in registry order."""
    found = []
    for entry in OUTPUTS:
        spec = entry.of(outputs)
        if spec is not None and entry.from_trace is not None:
            found.append((entry, spec))
    return found
