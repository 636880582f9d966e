"""The files a run writes as it goes: the results file and the trace (``--results``, ``--record``).

Both are driver sinks, written on the engine thread and flushed after each step, so whatever
ends the run (quit, Ctrl+C, SIGTERM, a lost ssh connection, a crash) keeps every finished
result and every recorded step but the one in flight. They are opened here, before the
engine starts, so an unwritable path is reported at once rather than after a long start-up.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stepview.engine.engine_args import ParsedEngineArgs, vllm_version
from stepview.engine.recorder import ResultsWriter, TraceRecorder
from stepview.model.sink import SnapshotSink


class EngineArgsHolder:
    """Filled in by the engine thread once vLLM's flags are parsed; read by the trace header."""

    def __init__(self, parsed: ParsedEngineArgs | None = None) -> None:
        self.parsed = parsed

    def header_fields(self) -> Mapping[str, Any]:
        parsed = self.parsed
        return {
            "vllm": vllm_version(),
            "model": parsed.model_label if parsed else "",
            "demo_model": parsed.demo_model if parsed else False,
            "engine_args": parsed.as_dict if parsed else {},
        }


def file_sinks(
    own: argparse.Namespace, holder: EngineArgsHolder, *, results_default: Path | None
) -> list[SnapshotSink]:
    """Open the results file and the trace asked for on the command line (raises OSError)."""
    sinks: list[SnapshotSink] = []
    results = own.results or results_default
    if results is not None:
        Path(results).parent.mkdir(parents=True, exist_ok=True)
        sinks.append(ResultsWriter(results, append=own.results is not None))
    if own.record is not None:
        header: Callable[[], Mapping[str, Any]] = holder.header_fields
        sinks.append(TraceRecorder(own.record, header))
    return sinks


def sink_errors(sinks: Sequence[SnapshotSink]) -> list[str]:
    """Why a file stopped being written mid-run (disk full, file removed), to tell the user.

    The engine ran on regardless (a sink never stops it), so this is the only place the
    user learns that the file holds less than the run produced.
    """
    errors = (getattr(sink, "error", None) for sink in sinks)
    return [error for error in errors if isinstance(error, str)]
