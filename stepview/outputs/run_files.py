"""The files a live run writes as it goes: the results file (``--results``) and the trace
(``--record``, rotated with ``--record-rotate`` / ``--record-keep``).

Both are driver sinks (:mod:`stepview.files.results_file`, :mod:`stepview.trace.recorder`),
opened before the engine starts so an unwritable path is one line, not a lost run.

The results file has two lives. In the TUI, with no ``--results``, a new one is made in
stepview's data directory, and removed again if the run finished nothing: the user did not
ask for it, so an empty one is only litter. A file the user named is appended to and never
removed. Headless runs print their results, so they write a results file only when named.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stepview.outputs.entry import (
    FINISHED,
    HELP_FILES,
    HELP_LONG_RUN,
    LIVE,
    Companions,
    Flag,
    Opened,
    Opening,
    Output,
    Say,
    Values,
)
from stepview.run.flag_values import size
from stepview.run.spec import OWN, RERUN, WATCH

if TYPE_CHECKING:
    from stepview.files.results_file import ResultsWriter
    from stepview.trace.recorder import TraceRecorder


def default_results_path() -> Path:
    """A new results file per TUI run, named by the time it started and the process id."""
    from platformdirs import user_data_dir

    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(user_data_dir("stepview")) / "results" / f"results-{stamp}-{os.getpid()}.jsonl"


class ResultsFile(Opened):
    """The results file, open: where it is, where this run's records begin in it (a file
    appended to), and whether stepview chose it (removed at the end when empty)."""

    def __init__(self, writer: ResultsWriter, offset: int, *, chosen: bool) -> None:
        self.sinks = (writer,)
        self.path = Path(writer.path)
        self.offset = offset
        self.chosen = chosen

    def discard(self) -> None:
        self.sinks[0].close()
        self.is_empty()

    def is_empty(self) -> bool:
        """True when the file holds nothing; a file stepview chose that is empty is deleted."""
        try:
            if self.path.stat().st_size:
                return False
            if self.chosen:
                self.path.unlink()
        except OSError:
            pass
        return True


def open_results(path: Path | None, opening: Opening) -> Opened | str:
    """The results file: the one named, appended to; else, in the TUI, a new one."""
    from stepview.files.results_file import ResultsWriter

    chosen = path is None and opening.default_results
    offset = 0  # where this run's records begin in a results file it appends to
    if path is not None:
        with contextlib.suppress(OSError):
            offset = path.stat().st_size
    elif not chosen:
        return Opened()
    try:
        if path is None:
            path = default_results_path()
            path.parent.mkdir(parents=True, exist_ok=True)
        writer = ResultsWriter(path, append=not chosen, annotate=opening.annotate)
    except OSError as exc:
        return f"cannot open output file: {exc}"
    return ResultsFile(writer, offset, chosen=chosen)


@dataclass(frozen=True, slots=True)
class ResultsSpec:
    """``--results FILE``; ``path`` is ``None`` when not named (the TUI then makes one)."""

    path: Path | None = None


RESULTS: Output[ResultsSpec] = Output(
    name="results",
    flags=(
        Flag(
            "--results",
            HELP_FILES,
            {
                "type": Path,
                "metavar": "FILE",
                "help": "append every finished request to this JSONL file as it finishes "
                "(TUI default: a new file in stepview's data directory)",
            },
        ),
    ),
    kind=LIVE,
    sources=frozenset({OWN, WATCH, RERUN}),
    needs=frozenset({FINISHED}),
    spec=lambda values: ResultsSpec(values["results"]),  # always: the TUI writes one unasked
    paths=lambda spec: {} if spec.path is None else {"--results": spec.path},
    open=lambda spec, opening: open_results(spec.path, opening),
)


@dataclass(frozen=True, slots=True)
class RecordSpec:
    """``--record FILE``, rotated at ``rotate`` bytes keeping ``keep`` parts (``None``: all)."""

    path: Path
    rotate: int | None = None
    keep: int | None = None


class RecordFile(Opened):
    """The trace, open; at the end it names its parts, if it was rotated."""

    def __init__(self, recorder: TraceRecorder) -> None:
        self.sinks = (recorder,)
        self.recorder = recorder

    def discard(self) -> None:
        self.recorder.close()

    def report(self, say: Say) -> None:
        parts = self.recorder.parts
        if len(parts) > 1:
            say(f"trace recorded in {len(parts)} parts, {parts[0]} to {self.recorder.path}")


def open_record(spec: RecordSpec, opening: Opening) -> Opened | str:
    from stepview.trace.recorder import TraceRecorder

    try:
        return RecordFile(
            TraceRecorder(spec.path, opening.header, rotate=spec.rotate, keep=spec.keep)
        )
    except OSError as exc:
        return f"cannot open output file: {exc}"


def _record_spec(values: Values) -> RecordSpec | None:
    path = values["record"]
    return (
        None if path is None else RecordSpec(path, values["record_rotate"], values["record_keep"])
    )


RECORD: Output[RecordSpec] = Output(
    name="record",
    flags=(
        Flag(
            "--record",
            HELP_FILES,
            {"type": Path, "metavar": "FILE", "help": "write a JSONL trace of the run"},
        ),
        Flag(
            "--record-rotate",
            HELP_LONG_RUN,
            {
                "type": size,
                "metavar": "SIZE",
                "help": "with --record FILE: start a new file once it holds SIZE (e.g. 500M): "
                "FILE, then FILE with .2, .3... before its suffix; each replays on its own and "
                "names the ones before it",
            },
        ),
        Flag(
            "--record-keep",
            HELP_LONG_RUN,
            {
                "type": int,
                "metavar": "N",
                "help": "with --record-rotate: keep the newest N files, removing older ones "
                "(default: all)",
            },
            at_least_one=True,
        ),
    ),
    kind=LIVE,
    sources=frozenset({OWN, WATCH, RERUN}),
    needs=frozenset({FINISHED}),
    spec=_record_spec,
    companions=(
        Companions(("--record-rotate",), "--record FILE", "record"),
        Companions(("--record-keep",), "--record-rotate SIZE", "record_rotate"),
    ),
    paths=lambda spec: {"--record": spec.path},
    open=open_record,
)

ENTRIES: tuple[Output[Any], ...] = (RECORD, RESULTS)
"""This module's entries, in the registry's order (``--help`` shows ``--record`` first)."""
