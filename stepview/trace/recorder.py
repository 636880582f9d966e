"""The ``--record`` sink: every snapshot the driver publishes, written to a trace as it happens.

It runs on the driver thread between two engine steps (a
:class:`~stepview.model.sink.SnapshotSink`), so it only encodes what changed
(:class:`~stepview.trace.encoder.TraceEncoder`) and writes it through a
:class:`~stepview.trace.linefile.LineFile`, flushed after every step. A failure to encode or
to write stops the trace, never the engine.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stepview.model.alerts import Alert
from stepview.model.snapshot import EngineInfo, EngineState, RequestView, StepSnapshot
from stepview.trace.encoder import TraceEncoder
from stepview.trace.format import alert_line, trace_header
from stepview.trace.linefile import LineFile

log = logging.getLogger(__name__)

HeaderFields = Mapping[str, Any] | Callable[[], Mapping[str, Any]]


class TraceRecorder(LineFile):
    """Writes a replayable trace (:mod:`stepview.trace.format`) of every published snapshot.

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
        self._alerts: tuple[Alert, ...] = ()  # the alerts of the last snapshot written
        self.snapshots_written = 0

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        if not self.writable:
            return  # writing failed earlier (see ``error``): no point encoding
        try:
            encoder = self._encoder
            if encoder is None:
                if snapshot.engine_state is EngineState.STARTING:
                    self._held.append(snapshot)
                    return
                encoder = self._start(snapshot.info)
            lines = encoder.encode(snapshot)
            if snapshot.alerts is not self._alerts:
                lines.extend(self._new_alerts(snapshot.alerts))
        except Exception as exc:  # a recorder bug must not stop the engine; it stops the trace
            log.exception("encoding step %d failed", snapshot.step)
            self.fail(f"recording {self.path} failed at step {snapshot.step}: {exc!r}")
            return
        if self.write_lines(lines):
            self.snapshots_written += 1

    def _new_alerts(self, alerts: tuple[Alert, ...]) -> list[dict[str, Any]]:
        """An ``alert`` line for each alert raised since the last snapshot (after its step
        line): the problems a run had, listed by tools without replaying it."""
        before = {alert.key for alert in self._alerts}
        self._alerts = alerts
        return [alert_line(alert) for alert in alerts if alert.key not in before]

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
        if self.write_lines(lines):
            self.snapshots_written += len(self._held)
        self._held = []
        return encoder

    def close(self) -> None:
        if self._encoder is None and self.writable:
            self._start(self._held[-1].info if self._held else EngineInfo())
        self.close_file()
