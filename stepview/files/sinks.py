"""The files a run writes as it goes: the results file and the trace (``--results``, ``--record``).

Both are driver sinks, written on the engine thread and flushed after each step, so whatever
ends the run (quit, Ctrl+C, SIGTERM, a lost ssh connection, a crash) keeps every finished
result and every recorded step but the one in flight. They are opened here, before the
engine starts, so an unwritable path is reported at once rather than after a long start-up.
Paths come in as plain values: which flag asked for them is the launcher's business.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stepview.files.records import Annotate
from stepview.files.results_file import ResultsWriter
from stepview.model.sink import SnapshotSink
from stepview.trace.recorder import TraceRecorder


def file_sinks(
    header: Callable[[], Mapping[str, Any]],
    *,
    results: Path | None,
    append_results: bool,
    record: Path | None,
    rotate: int | None = None,
    keep: int | None = None,
    annotate: Annotate | None = None,
) -> list[SnapshotSink]:
    """Open the results file and the trace, those that are asked for (raises ``OSError``).

    ``append_results`` adds to an existing results file (one the user named) instead of
    starting a new one. The trace header's extra fields come from ``header``, called when
    the engine has started (e.g. :meth:`EngineArgsHolder.header_fields`: the engine's
    flags). The directories must exist (the launcher checked the paths); if one file cannot
    be opened, the one already opened is closed again before the error goes up.
    ``annotate`` adds fields to every result (the run insight's timeline and preemptions);
    ``rotate`` and ``keep`` are the trace's ``--record-rotate`` and ``--record-keep``.
    """
    sinks: list[SnapshotSink] = []
    try:
        if results is not None:
            sinks.append(ResultsWriter(results, append=append_results, annotate=annotate))
        if record is not None:
            sinks.append(TraceRecorder(record, header, rotate=rotate, keep=keep))
    except OSError:
        for sink in sinks:
            sink.close()
        raise
    return sinks


def sink_errors(sinks: Sequence[SnapshotSink]) -> list[str]:
    """Why a file stopped being written mid-run (disk full, file removed), to tell the user.

    The engine ran on regardless (a sink never stops it), so this is the only place the
    user learns that the file holds less than the run produced.
    """
    return [sink.error for sink in sinks if sink.error is not None]
