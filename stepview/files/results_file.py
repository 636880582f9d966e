"""The ``--results`` sink: every finished request, appended to a JSON Lines file as it finishes.

Not a trace (nothing here can be replayed): one
:func:`~stepview.files.records.request_record` per request that reached a final state, the
same record ``--headless --json`` prints. It shares the trace's way of writing
(:class:`~stepview.trace.linefile.LineFile`: flushed per step, a failure stops the file and
never the engine).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from stepview.files.records import Annotate, request_record
from stepview.model.snapshot import RequestView, StepSnapshot
from stepview.trace.linefile import LineFile


class ResultsWriter(LineFile):
    """Appends one :func:`~stepview.files.records.request_record` line per finished request.

    Written and flushed as each request reaches a final state (finished, aborted, rejected),
    so a run that is killed keeps every result it had produced. ``append=True`` adds to an
    existing file instead of starting a new one.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        append: bool = False,
        annotate: Annotate | None = None,
    ) -> None:
        """``annotate`` adds fields to each record (the run insight's timeline)."""
        super().__init__(path, "a" if append else "w")
        self.results_written = 0
        self._annotate = annotate

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        annotate = self._annotate
        if finished and self.write_lines([request_record(v, annotate) for v in finished]):
            self.results_written += len(finished)

    def close(self) -> None:
        self.close_file()
