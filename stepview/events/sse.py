"""``--events http://HOST:PORT``: the events as Server-Sent Events at ``/events``, to any reader.

One thread runs an asyncio loop that serves every reader. asyncio rather than the standard
library's ``ThreadingHTTPServer`` because a reader that stops reading must cost nothing but
memory: with a thread per reader, that thread would sit blocked in a ``send`` and could not see
that it fell behind; here writes never block, each reader's backlog is visible (``drain``), and
one thread serves ten readers as it serves one, which matters on a machine whose cores the
engine needs. The driver thread never touches a socket: it appends to the shared
:class:`~stepview.events.buffer.EventBuffer` and wakes this loop (one ``call_soon_threadsafe``
per batch, none while a wake-up is already on its way).

Each reader has a place in the buffer (the last number it was given). Its queue is what lies
between that place and the newest event, bounded by ``queue``: a reader further behind loses
the oldest of it, is told so by a ``dropped`` event (with the count and which numbers) when it
reads again, and is closed once it has lost ``queue`` events in all. Every event lost is
counted (``on_dropped``: ``stepview_events_dropped_total``). A reader that reconnects with
``Last-Event-ID: N`` gets every event after N the buffer still holds (``0``: all it holds),
after a ``dropped`` event for those it no longer does. ``id:`` numbers rise from 1 per run.

The socket is bound in the constructor, on the caller's thread, so a port in use is known
before the engine starts (:class:`EventsUnavailable`, one line).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

from stepview.events.buffer import EventBuffer
from stepview.events.schema import dropped
from stepview.model.endpoint import bind_problem, netloc

log = logging.getLogger(__name__)

KEEPALIVE_S = 15.0
"""A comment line this often to a reader with nothing new, so a dead connection is found."""
_HEAD_TIMEOUT_S = 10.0
_BATCH = 256  # events written to a reader at once, at most
_SEND_BUFFER = 64 * 1024  # the kernel's share of a reader's backlog (the rest is counted)
_WRITE_HIGH = 64 * 1024  # bytes in the transport before a reader's writes wait


class EventsUnavailable(Exception):
    """The stream cannot be served; the message is the one line to tell the user."""


class _Reader:
    """One connected reader: where it is in the buffer and what it lost."""

    __slots__ = ("closing", "cursor", "lost", "news", "skipped", "writer")

    def __init__(self, writer: asyncio.StreamWriter, cursor: int) -> None:
        self.writer = writer
        self.cursor = cursor  # the last event number handed to its transport
        self.news = asyncio.Event()
        self.lost = 0  # events it lost in all
        self.skipped: tuple[int, int] | None = None  # lost events not told yet (first, last)
        self.closing = False


class EventServer:
    """Serves ``buffer`` at ``http://host:port/events`` from a thread of its own until
    :meth:`stop`. ``token``: readers must send ``Authorization: Bearer TOKEN``."""

    def __init__(
        self,
        buffer: EventBuffer,
        host: str,
        port: int,
        *,
        queue: int,
        token: str | None = None,
        on_dropped: Callable[[int], None] | None = None,
    ) -> None:
        self.buffer = buffer
        self.queue = max(1, queue)
        self._token = token
        self._on_dropped = on_dropped
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self._socket = socket.create_server((host, port), family=family, backlog=64)
        except OSError as exc:
            raise EventsUnavailable(bind_problem("events", host, port, exc)) from None
        self.host = host
        self.port: int = self._socket.getsockname()[1]
        self.dropped_total = 0
        self._readers: set[_Reader] = set()
        self._loop = asyncio.new_event_loop()
        self._wake_due = False
        self._stopping: asyncio.Event | None = None
        self._started = threading.Event()
        self.ever_connected = threading.Event()
        """Set once a reader was given the stream (a replay waits for one)."""
        self._thread = threading.Thread(target=self._run, name="stepview-events", daemon=True)
        self._thread.start()
        self._started.wait()
        buffer.wake = self._wake

    @property
    def url(self) -> str:
        return f"http://{netloc(self.host, self.port)}/events"

    # -- from other threads ----------------------------------------------------------------

    def _wake(self) -> None:
        """New events (any thread): wake the loop, once until it has looked."""
        if self._wake_due:
            return
        self._wake_due = True
        with contextlib.suppress(RuntimeError):  # the loop is closed: the run is over
            self._loop.call_soon_threadsafe(self._woken)

    def readers_at_end(self) -> bool:
        """Every connected reader has been handed every event (none connected: True)."""
        newest = self.buffer.newest
        return all(reader.cursor >= newest for reader in list(self._readers))

    def stop(self, flush_s: float = 1.0) -> None:
        """Stop serving: each reader gets what it has not had yet (up to ``flush_s``), then
        its connection closes; the port is released. Calling it again does nothing."""
        if not self._thread.is_alive():
            return
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._begin_stop, flush_s)
        self._thread.join(flush_s + 2.0)

    # -- the loop's thread ------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        except Exception:
            log.exception("the events server failed")
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._client, sock=self._socket)
        self._started.set()
        async with server:
            await self._stopping.wait()
            server.close()
        await self._flush_then_close()

    def _begin_stop(self, flush_s: float) -> None:
        self._flush_s = flush_s
        if self._stopping is not None:
            self._stopping.set()

    async def _flush_then_close(self) -> None:
        readers = list(self._readers)
        for reader in readers:
            reader.closing = True
            reader.news.set()
        deadline = time.monotonic() + getattr(self, "_flush_s", 1.0)
        while self._readers and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        for reader in list(self._readers):
            reader.writer.transport.abort()

    def _woken(self) -> None:
        self._wake_due = False
        newest = self.buffer.newest
        for reader in list(self._readers):
            self._bound(reader, newest)
            reader.news.set()

    def _bound(self, reader: _Reader, newest: int) -> None:
        """Hold the reader's queue to :attr:`queue` events: the oldest beyond it are lost to
        it (counted); past ``queue`` lost in all, it is closed."""
        behind = newest - reader.cursor
        if behind <= self.queue:
            return
        self._lose(reader, reader.cursor + 1, newest - self.queue)
        if reader.lost >= self.queue and not reader.closing:
            reader.closing = True
            # Best effort: a reader that reads nothing will not see it.
            with contextlib.suppress(Exception):
                reader.writer.write(self._dropped_line(reader))
            reader.writer.transport.abort()

    def _lose(self, reader: _Reader, first: int, last: int) -> None:
        count = last - first + 1
        if count <= 0:
            return
        reader.cursor = last
        reader.lost += count
        told = reader.skipped
        reader.skipped = (first if told is None else told[0], last)
        self.dropped_total += count
        if self._on_dropped is not None:
            self._on_dropped(count)

    def _dropped_line(self, reader: _Reader, why: str = "behind") -> bytes:
        first, last = reader.skipped or (reader.cursor, reader.cursor)
        reader.skipped = None
        event = dropped(last - first + 1, first, last, why, time.time())
        return f"data: {json.dumps(event, separators=(',', ':'))}\n\n".encode()

    async def _client(self, stream: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            cursor = await self._handshake(stream, writer)
            if cursor is None:
                return
            reader = _Reader(writer, cursor)
            oldest = self.buffer.oldest
            if cursor + 1 < oldest:  # asked for more than the buffer holds
                reader.skipped = (cursor + 1, oldest - 1)
                reader.cursor = oldest - 1
                writer.write(self._dropped_line(reader, "buffer"))
            self._readers.add(reader)
            self.ever_connected.set()
            try:
                await self._follow(reader)
            finally:
                self._readers.discard(reader)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, OSError):
            pass
        finally:
            writer.transport.abort()

    async def _handshake(
        self, stream: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> int | None:
        """Read the request; answer it; the number the reader's stream starts after, or
        ``None`` when it was answered with an error."""
        head = await asyncio.wait_for(stream.readuntil(b"\r\n\r\n"), _HEAD_TIMEOUT_S)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if len(parts) != 3 or parts[0] not in ("GET", "HEAD"):
            await _answer(writer, "405 Method Not Allowed", "only GET /events\n")
            return None
        target = urlsplit(parts[1])
        if target.path.rstrip("/") != "/events":
            await _answer(writer, "404 Not Found", "the events are at /events\n")
            return None
        if self._token is not None:
            given = headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self._token}".encode()):
                await _answer(
                    writer,
                    "401 Unauthorized",
                    "a bearer token is needed\n",
                    'WWW-Authenticate: Bearer realm="stepview events"\r\n',
                )
                return None
        last = headers.get("last-event-id")
        if last is None:  # a client that cannot set headers may ask in the query
            asked = parse_qs(target.query).get("last_event_id")
            last = asked[0] if asked else None
        newest = self.buffer.newest
        if last is None or last == "":
            cursor = newest
        elif last.strip().isdigit():
            cursor = int(last)
            if cursor > newest:  # a number of another run's: all this one holds
                cursor = 0
        else:
            await _answer(writer, "400 Bad Request", "Last-Event-ID is an event number\n")
            return None
        with contextlib.suppress(OSError):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SEND_BUFFER)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        writer.transport.set_write_buffer_limits(high=_WRITE_HIGH)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Cache-Control: no-cache\r\nConnection: close\r\nX-Accel-Buffering: no\r\n\r\n"
            b"retry: 1000\n\n"
        )
        if parts[0] == "HEAD":
            await writer.drain()
            return None
        return cursor

    async def _follow(self, reader: _Reader) -> None:
        """Hand the reader every event after its place, as they come, until it or the
        server closes."""
        buffer = self.buffer
        writer = reader.writer
        while True:
            self._bound(reader, buffer.newest)
            if reader.skipped is not None and not writer.is_closing():
                writer.write(self._dropped_line(reader))
            newest = buffer.newest
            if reader.cursor < newest and not writer.is_closing():
                end = min(newest, reader.cursor + _BATCH)
                chunks = []
                for number in range(reader.cursor + 1, end + 1):
                    line = buffer.encoded(number)
                    if line is None:  # overwritten under a reader a whole buffer behind
                        self._lose(reader, number, number)
                        continue
                    chunks.append(line)
                reader.cursor = end
                writer.write(b"".join(chunks))
                await writer.drain()
                continue
            if reader.closing or writer.is_closing():
                await writer.drain()
                return
            reader.news.clear()
            try:
                await asyncio.wait_for(reader.news.wait(), KEEPALIVE_S)
            except TimeoutError:
                writer.write(b": keepalive\n\n")
                await writer.drain()


async def _answer(writer: asyncio.StreamWriter, status: str, body: str, extra: str = "") -> None:
    data = body.encode()
    writer.write(
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n{extra}"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
        + data
    )
    await writer.drain()
