"""A server's KV-cache events, subscribed to beside its ``/metrics`` (``--kv-events tcp://…``).

:class:`KvEventsWatch` holds a zmq SUB socket connected to the server's KV event publisher
(all topics) and, on each :meth:`~KvEventsWatch.poll` (the ``/metrics`` watch calls it once per
scrape, on its thread), reads what has arrived without waiting, feeds it to a
:class:`~stepview.engine.watch.metrics.kv_blocks.KvBlockTracker`,
and answers the window's figures as a
:class:`~stepview.model.server_window.KvBlocks`. Between polls the batches wait in zmq's queue
(:data:`RECEIVE_HWM` messages; beyond that zmq drops them and the sequence gap is counted as
missed). The publisher's replay socket is not used: a gap is counted, not filled.

zmq connects lazily and keeps trying, so a server not up yet, or restarted, is picked up when
it publishes; until the first batch the figures say none arrived.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import zmq
from zmq.utils.monitor import parse_monitor_message

from stepview.engine.watch.metrics.kv_blocks import KvBlockTracker, KvTotals
from stepview.engine.watch.metrics.kv_event_wire import decode_message
from stepview.insight.histogram_window import CounterWindow
from stepview.model.address import ZmqEndpoint
from stepview.model.server_window import KvBlocks

RECEIVE_HWM = 100_000
"""Batches zmq holds for this subscriber between polls (vLLM's publisher's own default HWM)."""
MAX_PER_POLL = 20_000
"""Batches read per poll at most, so that a flood cannot hold a scrape up; the rest wait."""
_WINDOWED = ("stored", "removed", "reused", "recomputed")


class KvEventsWatch:
    """The KV events published at ``address`` (``tcp://HOST:PORT`` or ``ipc://PATH``), over
    the last ``window`` seconds. Not thread-safe: one caller, who also closes it."""

    def __init__(
        self, endpoint: ZmqEndpoint, *, window: float = 60.0, capacity: int | None = None
    ) -> None:
        self.address = endpoint.text
        self.window = window
        self.tracker = KvBlockTracker() if capacity is None else KvBlockTracker(capacity)
        self._windows = {name: CounterWindow(window) for name in _WINDOWED}
        self._socket: zmq.Socket[bytes] | None = None
        self._monitor: zmq.Socket[bytes] | None = None
        self._up = False  # zmq's monitor: handshake done, not disconnected since
        self._started: float | None = None
        self._problem = ""

    def poll(self, clock: float) -> KvBlocks:
        """Read what has arrived; the figures at ``clock`` (seconds, increasing)."""
        if self._started is None:
            self._started = clock
        socket = self._connected()
        self._read_monitor()
        for _ in range(MAX_PER_POLL):
            try:
                frames = socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            try:
                batch = decode_message(frames)
            except ValueError as exc:
                self._problem = str(exc)
                continue
            self.tracker.apply(batch)
        return self.figures(clock, self.tracker.totals())

    def figures(self, clock: float, totals: KvTotals) -> KvBlocks:
        """The window's figures given the tracker's ``totals`` now (kept apart from the socket
        so that the window's arithmetic can be checked on its own)."""
        if self._started is None:
            self._started = clock
        for name, window in self._windows.items():
            window.add(clock, getattr(totals, name))
        increase = {name: int(window.increase()) for name, window in self._windows.items()}
        covered = min(self.window, clock - self._started)
        return KvBlocks(
            address=self.address,
            batches=totals.batches,
            stored_per_s=increase["stored"] / covered if covered > 0 else 0.0,
            removed_per_s=increase["removed"] / covered if covered > 0 else 0.0,
            stored=increase["stored"],
            reused=increase["reused"],
            recomputed=increase["recomputed"],
            resident=totals.resident,
            missed=totals.missed,
            restarts=totals.restarts,
            clears=totals.clears,
            problem=self._problem,
            connected=self._up,
        )

    def _read_monitor(self) -> None:
        """Whether the publisher is connected now: a PUB socket drops what it sends before
        the connection is up, so until then events are lost, not late."""
        monitor = self._monitor
        while monitor is not None:
            try:
                event = parse_monitor_message(monitor.recv_multipart(zmq.NOBLOCK))["event"]
            except zmq.Again:
                return
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._up = True
            elif event == zmq.EVENT_DISCONNECTED:
                self._up = False

    def close(self) -> None:
        if self._monitor is not None:
            self._monitor.close(linger=0)
            self._monitor = None
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None

    def _connected(self) -> zmq.Socket[bytes]:
        if self._socket is None:
            socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
            socket.setsockopt(zmq.RCVHWM, RECEIVE_HWM)
            socket.setsockopt(zmq.SUBSCRIBE, b"")  # every topic: one publisher, one stream
            events = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
            self._monitor = socket.get_monitor_socket(events)
            socket.connect(self.address)
            self._socket = socket
        return self._socket


def kv_record(kv: KvBlocks) -> dict[str, Any]:
    """The figures as a headless JSON line's ``kv_blocks`` object."""
    record = {field.name: getattr(kv, field.name) for field in fields(kv)}
    record["stored_per_s"] = round(kv.stored_per_s, 2)
    record["removed_per_s"] = round(kv.removed_per_s, 2)
    share = kv.reuse_share
    record["reuse_share"] = None if share is None else round(share, 4)
    return record
