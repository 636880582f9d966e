"""``--events``, opened: the destinations of one run and the sinks that feed them.

This is the one object a mode needs (and, in the output registry to come, the one entry):
:func:`open_events` opens every destination before the engine starts (a file that cannot be
made, a port in use, an address other machines reach without ``--events-remote``: one line,
:class:`EventsUnavailable`), :meth:`EventsOutput.sink` gives a driver its sink (one per
server in a fleet, each naming its server), :meth:`EventsOutput.close` flushes the stream's
readers and closes the files once the run is over.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from stepview.events.buffer import EventBuffer
from stepview.events.derive import EventDeriver
from stepview.events.lines import EventFile, EventPrinter
from stepview.events.sink import EventSink, Outlet
from stepview.events.spec import FILE, HTTP, STDOUT, EventsSpec, remote_refusal
from stepview.events.sse import EventServer, EventsUnavailable
from stepview.model.snapshot import StepSnapshot

__all__ = ["EventsOutput", "EventsUnavailable", "open_events"]


def _now(_: StepSnapshot) -> float:
    return time.time()


class EventsOutput:
    """The run's open event destinations (see the module docstring)."""

    def __init__(self, spec: EventsSpec) -> None:
        self.spec = spec
        self.outlets: list[Outlet] = []
        self.files: list[EventFile] = []
        self.buffer: EventBuffer | None = None
        self.server: EventServer | None = None
        self.count_dropped: Callable[[int], None] | None = None
        """Where readers' lost events are counted (``stepview_events_dropped_total``), set
        when metrics are served."""
        self._closed = threading.Event()

    def sink(
        self,
        server: str | None = None,
        *,
        owner: bool = True,
        wall: Callable[[StepSnapshot], float] = _now,
    ) -> EventSink:
        """A driver's sink. ``server``: the watched server's address, named in each event;
        ``owner``: closing the sink closes the destinations (one driver; a fleet closes them
        itself); ``wall``: stepview's wall clock at a snapshot (a replay's is the trace's)."""
        spec = self.spec
        deriver = EventDeriver(
            step_every=spec.step_every, prompts=spec.prompts, server=server, wall=wall
        )
        return EventSink(
            deriver,
            self.outlets,
            on_close=self.close if owner else None,
            errors=self.error,
        )

    def error(self) -> str | None:
        """Why a file of events stopped being written mid-run, if one did."""
        return next((f.error for f in self.files if f.error is not None), None)

    def _dropped(self, count: int) -> None:
        counter = self.count_dropped
        if counter is not None:
            counter(count)

    def wait_for_readers(self, stop: threading.Event) -> None:
        """Until a reader connected and every reader has had every event (a replay served
        over HTTP), or ``stop`` is set."""
        server = self.server
        if server is None:
            return
        while not stop.wait(0.05):
            if server.ever_connected.is_set() and server.readers_at_end():
                return

    def close(self) -> None:
        """The run is over: readers get what they have not had yet, files are closed. Once."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self.server is not None:
            self.server.stop()
        for file in self.files:
            file.close()


def open_events(spec: EventsSpec, stdout: IO[str] | None = None) -> EventsOutput:
    """Open every destination of ``spec`` (raises :class:`EventsUnavailable` with the line to
    say; whatever was opened before is closed again)."""
    output = EventsOutput(spec)
    try:
        for destination in spec.destinations:
            if destination.kind == STDOUT:
                output.outlets.append(EventPrinter(stdout or sys.stdout))
            elif destination.kind == FILE:
                try:
                    file = EventFile(destination.path)
                except OSError as exc:
                    raise EventsUnavailable(
                        f"--events {destination.text}: cannot write it: {exc.strerror or exc}"
                    ) from None
                output.files.append(file)
                output.outlets.append(file)
            elif destination.kind == HTTP:
                refusal = remote_refusal(destination, spec.remote)
                if refusal is not None:
                    raise EventsUnavailable(refusal)
                buffer = output.buffer = EventBuffer(spec.buffer)
                output.server = EventServer(
                    buffer,
                    destination.host,
                    destination.port,
                    queue=spec.queue,
                    token=spec.token,
                    on_dropped=output._dropped,
                )
                output.outlets.append(_BufferOutlet(buffer))
    except BaseException:
        with contextlib.suppress(Exception):
            output.close()
        raise
    return output


class _BufferOutlet:
    """The stream's buffer as an outlet: the events appended, the server woken."""

    __slots__ = ("_buffer",)

    def __init__(self, buffer: EventBuffer) -> None:
        self._buffer = buffer

    def put(self, events: Sequence[dict[str, Any]]) -> None:
        self._buffer.extend(events)
