"""Snapshot sinks that write files while the engine runs: the trace, and the results file.

Both run on the driver thread between two engine steps (see
:class:`~stepview.engine.driver.SnapshotSink`), so they do only what must happen now: encode
what changed, write it, flush. They flush after every call, not ``fsync``: a crashed or killed
stepview then loses at most the step in flight (the data is in the kernel's page cache), and a
step is not slowed by a disk round trip. A machine crash can lose more; that is the trade.

A sink must never take the engine down: a failed write (disk full, file removed) is logged,
kept in :attr:`error`, and stops that sink only.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from stepview.model.records import request_record
from stepview.model.snapshot import EngineInfo, EngineState, RequestView, StepSnapshot
from stepview.model.trace import TraceEncoder, dump_line, trace_header

log = logging.getLogger(__name__)

HeaderFields = Mapping[str, Any] | Callable[[], Mapping[str, Any]]


class _LineFile:
    """A text file written a line at a time and flushed; the first write error disables it."""

    def __init__(self, path: str | os.PathLike[str], mode: str) -> None:
        self.path = os.fspath(path)
        self._file: IO[str] | None = open(self.path, mode, encoding="utf-8", newline="\n")  # noqa: SIM115 - closed by close()
        self.error: str | None = None
        self.bytes_written = 0

    def _write(self, lines: Sequence[Mapping[str, Any]]) -> bool:
        """Write and flush ``lines``; False if the file is (or just became) unusable."""
        file = self._file
        if file is None:
            return False
        try:
            text = "".join(dump_line(line) for line in lines)
            file.write(text)
            file.flush()
        except (OSError, ValueError, TypeError) as exc:
            self._fail(f"writing {self.path} failed: {exc}")
            return False
        self.bytes_written += len(text)
        return True

    def _fail(self, message: str) -> None:
        """Stop writing for good: keep the reason, log it, let the engine run on."""
        self.error = message
        log.error("%s; no more is written to it", message)
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()

    def _close_file(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError as exc:
                self.error = f"closing {self.path} failed: {exc}"
                log.error("%s", self.error)


class TraceRecorder(_LineFile):
    """Writes a replayable trace (``stepview.model.trace``) of every snapshot the driver publishes.

    The header goes out with the first snapshot of a started engine, so it carries the engine's
    real :class:`EngineInfo`; the start-up snapshots before it are held until then (an engine
    that never starts still gets a header, at :meth:`close`). ``header_fields`` adds what only
    the caller knows: ``vllm`` version, ``model``, ``engine_args``, anything else JSON-able.
    It may be a callable, called on the driver thread when the header is written, for facts
    that are only known once the engine thread has parsed its arguments.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        header_fields: HeaderFields | None = None,
    ) -> None:
        super().__init__(path, "w")
        self._fields = header_fields
        self._encoder: TraceEncoder | None = None
        self._held: list[StepSnapshot] = []
        self.snapshots_written = 0

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        if self._file is None:
            return  # writing failed earlier (see ``error``): no point encoding
        try:
            encoder = self._encoder
            if encoder is None:
                if snapshot.engine_state is EngineState.STARTING:
                    self._held.append(snapshot)
                    return
                encoder = self._start(snapshot.info)
            lines = encoder.encode(snapshot)
        except Exception as exc:  # a recorder bug must not stop the engine; it stops the trace
            log.exception("encoding step %d failed", snapshot.step)
            self._fail(f"recording {self.path} failed at step {snapshot.step}: {exc!r}")
            return
        if self._write(lines):
            self.snapshots_written += 1

    def _start(self, info: EngineInfo) -> TraceEncoder:
        """Write the header and the held start-up snapshots; return the encoder for the rest."""
        encoder = self._encoder = TraceEncoder(info)
        fields = self._fields
        if callable(fields):
            try:
                fields = fields()
            except Exception:  # a header without the caller's extras beats a failed engine
                log.exception("trace header fields failed; writing the header without them")
                fields = {}
        lines = [trace_header(fields or {}, info)]
        for held in self._held:
            lines.extend(encoder.encode(held))
        if self._write(lines):
            self.snapshots_written += len(self._held)
        self._held = []
        return encoder

    def close(self) -> None:
        if self._encoder is None and self._file is not None:
            self._start(self._held[-1].info if self._held else EngineInfo())
        self._close_file()


class ResultsWriter(_LineFile):
    """Appends one :func:`~stepview.model.records.request_record` line per finished request.

    Written and flushed as each request reaches a final state (finished, aborted, rejected),
    so a run that is killed keeps every result it had produced. ``append=True`` adds to an
    existing file instead of starting a new one.
    """

    def __init__(self, path: str | os.PathLike[str], *, append: bool = False) -> None:
        super().__init__(path, "a" if append else "w")
        self.results_written = 0

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        if finished and self._write([request_record(view) for view in finished]):
            self.results_written += len(finished)

    def close(self) -> None:
        self._close_file()
