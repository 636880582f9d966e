"""The ``--record`` sink: every snapshot the driver publishes, written to a trace as it happens.

It runs on the driver thread between two engine steps (a
:class:`~stepview.model.sink.SnapshotSink`), so it only encodes what changed
(:class:`~stepview.trace.encoder.TraceEncoder`) and writes it through a
:class:`~stepview.trace.linefile.LineFile`, flushed after every step. A failure to encode or
to write stops the trace, never the engine.

With ``--record-rotate SIZE`` a trace of a long watch goes on in a new file (its *part*) once
the current one holds SIZE: ``run.jsonl``, ``run.2.jsonl``, ``run.3.jsonl``... Each part
starts with a header naming the parts before it and a step line that holds every active
request whole (:class:`TraceLines` with ``standalone``), so it replays on its own.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from stepview.model.alerts import Alert
from stepview.model.recent import Finished, total_of
from stepview.model.snapshot import EngineInfo, EngineState, RequestView, StepSnapshot
from stepview.trace.encoder import TraceEncoder
from stepview.trace.format import alert_line, trace_header
from stepview.trace.linefile import PartedFile

log = logging.getLogger(__name__)

HeaderFields = Mapping[str, Any] | Callable[[], Mapping[str, Any]]


class TraceLines:
    """The lines of a trace from one snapshot on: its steps' deltas and an ``alert`` line for
    each alert raised.

    ``standalone``: the first snapshot may come mid-run (a rotated part, a flight recording),
    so it is written against nothing (every active request whole) and without the finished
    requests before it, which the lines before hold: lines from here replay on their own.
    ``after``: go on from that snapshot, whose lines another :class:`TraceLines` wrote (a
    flight recording that goes on past what its ring held).
    """

    def __init__(
        self, info: EngineInfo, *, standalone: bool = False, after: StepSnapshot | None = None
    ) -> None:
        self._encoder = TraceEncoder(info, after)
        # The alerts of the last snapshot encoded.
        self._alerts: tuple[Alert, ...] = () if after is None else after.alerts
        self._standalone = standalone

    def encode(self, snapshot: StepSnapshot) -> list[dict[str, Any]]:
        if self._standalone:
            self._standalone = False
            snapshot = replace(snapshot, finished=Finished(dropped=total_of(snapshot.finished)))
        lines = self._encoder.encode(snapshot)
        if snapshot.alerts is not self._alerts:
            lines.extend(self._new_alerts(snapshot.alerts))
        return lines

    def _new_alerts(self, alerts: tuple[Alert, ...]) -> list[dict[str, Any]]:
        """An ``alert`` line for each alert raised since the last snapshot (after its step
        line): the problems a run had, listed by tools without replaying it."""
        before = {alert.key for alert in self._alerts}
        self._alerts = alerts
        return [alert_line(alert) for alert in alerts if alert.key not in before]


def header_fields(fields: HeaderFields | None) -> dict[str, Any]:
    """The caller's extra header fields, called for if they are a callable; none if that
    fails (a header without them beats a failed engine)."""
    if callable(fields):
        try:
            fields = fields()
        except Exception:
            log.exception("trace header fields failed; writing the header without them")
            fields = {}
    return dict(fields or {})


class TraceRecorder(PartedFile):
    """Writes a replayable trace (:mod:`stepview.trace.format`) of every published snapshot.

    The header goes out with the first snapshot of a started engine, so it carries the engine's
    real :class:`EngineInfo`; the start-up snapshots before it are held until then (an engine
    that never starts still gets a header, at :meth:`close`). ``header_fields`` adds what only
    the caller knows: ``vllm`` version, ``model``, ``engine_args``, anything else JSON-able.
    It may be a callable, called on the driver thread when the header is written, for facts
    that are only known once the engine thread has parsed its arguments.

    ``rotate``: go on in a new part once a file holds that many bytes
    (:func:`~stepview.trace.linefile.part_path`);
    ``keep``: the newest parts kept, older ones removed (``None``: all).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        header_fields: HeaderFields | None = None,
        *,
        rotate: int | None = None,
        keep: int | None = None,
    ) -> None:
        super().__init__(path, "w", rotate=rotate, keep=keep)
        self._fields = header_fields
        self._header: dict[str, Any] | None = None  # the fields, once called for
        self._lines: TraceLines | None = None
        self._held: list[StepSnapshot] = []
        self.snapshots_written = 0

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        if not self.writable:
            return  # writing failed earlier (see ``error``): no point encoding
        try:
            lines = self._lines
            if lines is None:
                if snapshot.engine_state is EngineState.STARTING:
                    self._held.append(snapshot)
                    return
                lines = self._start(snapshot.info)
            elif self.full:
                lines = self._next_part(snapshot.info)
                if lines is None:
                    return
            out = lines.encode(snapshot)
        except Exception as exc:  # a recorder bug must not stop the engine; it stops the trace
            log.exception("encoding step %d failed", snapshot.step)
            self.fail(f"recording {self.path} failed at step {snapshot.step}: {exc!r}")
            return
        if self.write_lines(out):
            self.snapshots_written += 1

    def _start(self, info: EngineInfo) -> TraceLines:
        """Write the header and the held start-up snapshots; return the lines for the rest."""
        lines = self._lines = TraceLines(info)
        self._header = header_fields(self._fields)
        out = [trace_header(self._header, info)]
        for held in self._held:
            out.extend(lines.encode(held))
        if self.write_lines(out):
            self.snapshots_written += len(self._held)
        self._held = []
        return lines

    def _next_part(self, info: EngineInfo) -> TraceLines | None:
        """Close this part and go on in the next: a header naming the parts kept before it,
        then (from the caller) a standalone first step. None if the new file failed."""
        if not self.next_part():
            return None
        part = len(self.parts)
        fields = {**(self._header or {}), "part": part, "previous": self.kept_before()}
        self.write_lines([trace_header(fields, info)])
        log.info("trace goes on in %s (part %d)", self.path, part)
        self._lines = TraceLines(info, standalone=True)
        return self._lines

    def close(self) -> None:
        if self._lines is None and self.writable:
            self._start(self._held[-1].info if self._held else EngineInfo())
        self.close_file()
