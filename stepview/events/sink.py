"""The driver's sink for the events: a snapshot's events derived, then handed to every outlet.

One :class:`EventSink` per driver (a fleet has one per server it reads records from, each
naming its server); the outlets (a file, standard output, the stream's buffer) belong to the
:class:`~stepview.events.output.EventsOutput` that opened them and may be shared. A sink never
stops the engine: a failure to derive is logged once and turns this sink off, with the
reason in :attr:`EventSink.error`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from stepview.events.derive import EventDeriver
from stepview.model.snapshot import RequestView, StepSnapshot

log = logging.getLogger(__name__)

Event = dict[str, Any]


class Outlet(Protocol):
    """Where events go: a file, standard output, the stream's buffer."""

    def put(self, events: Sequence[Event]) -> None: ...


class EventSink:
    """A :class:`~stepview.model.sink.SnapshotSink` that turns snapshots into events."""

    def __init__(
        self,
        deriver: EventDeriver,
        outlets: Sequence[Outlet],
        *,
        on_close: Callable[[], None] | None = None,
        errors: Callable[[], str | None] | None = None,
    ) -> None:
        """``on_close``: called once when the driver closes its sinks (the outlets' owner
        closes them, for a single engine); ``errors``: the outlets' own failure, if any."""
        self._deriver: EventDeriver | None = deriver
        self._outlets = list(outlets)
        self._on_close = on_close
        self._errors = errors
        self._error: str | None = None

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        deriver = self._deriver
        if deriver is None:
            return
        try:
            events = deriver.observe(snapshot, finished)
        except Exception as exc:  # a bug here must not stop the engine; it stops the events
            log.exception("deriving the events of step %d failed", snapshot.step)
            self._error = f"the event stream stopped at step {snapshot.step}: {exc!r}"
            self._deriver = None
            return
        if events:
            for outlet in self._outlets:
                outlet.put(events)

    def close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    @property
    def error(self) -> str | None:
        if self._error is not None:
            return self._error
        return None if self._errors is None else self._errors()
