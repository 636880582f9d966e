"""A fleet's watches on a bounded number of threads: one event loop and a few workers.

A thread per server (each ``/metrics`` watch, each plug-in server's driver) made a fleet of 400
hold 402 threads, a server down or hung one of them parked for its timeout, and every zmq
subscriber a context with an I/O thread of its own. :class:`FleetPool` runs them all on one
asyncio loop (its thread: ``stepview-fleet-io``) and :data:`WORKERS` worker threads, whatever
the fleet's size:

* each member is a :class:`Unit`: its next unit of work is an optional read that waits for the
  network (:meth:`Unit.fetch`, a coroutine on the loop: a ``/metrics`` page; no thread waits
  for it, a server down or hung costs a socket and a timer), then the work on what was read
  (:meth:`Unit.work`, on a worker: a page read into figures, a turn of a plug-in server's
  driver), which says when the next is due (its interval, its pace, or a back-off after a
  failure). One coroutine per member awaits them in order, so a member's work runs on one
  worker at a time, never two at once: the driver's contract (one thread at a time calls
  the engine) holds for a pooled driver;
* a command sent to a member (the server's full view pausing it, say) wakes it at once
  (:meth:`FleetPool.wake`); a member stopped has its read, if one is under way, cancelled;
* the plug-in servers' subscribers share one zmq context (:attr:`FleetPool.zmq_context`: one
  I/O thread for all, not one each).

:class:`PooledSource` is a member as the fleet screen, the headless lines and a server's full
view see it: a :class:`~stepview.model.source.SnapshotSource` like any other, reading the
member's latest snapshot. The fleet's turn (:mod:`stepview.launch.fleet`) still applies: the
workers take it for their work, so one at most competes with the screen for the interpreter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import zmq

from stepview.engine.records.channel import ZmqContext
from stepview.model.commands import Command
from stepview.model.snapshot import StepSnapshot

log = logging.getLogger(__name__)

WORKERS = 4
"""The pool's worker threads. The fleet's turn lets one work at a time; more than one keeps the
fleet going while another waits on something slower than a read (a server's ``/v1/models``
looked up once it is reached)."""


class Unit(Protocol):
    """A fleet member the pool runs: a snapshot source (not started: the pool runs it) whose
    work comes in units, each an optional read on the loop and the work on what it read
    (``reads``: whether it has such a read)."""

    reads: bool

    @property
    def accepts_requests(self) -> bool: ...

    def latest(self) -> StepSnapshot: ...

    def history(self) -> Sequence[StepSnapshot]: ...

    def send(self, command: Command) -> None: ...

    def stop(self, timeout: float = 5.0) -> None:
        """Ask it to end: its next :meth:`work` answers ``None`` (never waits)."""

    async def fetch(self) -> Any:
        """What the next unit reads, on the pool's loop (``None``: it reads nothing there)."""

    def work(self, fetched: Any) -> float | None:
        """The unit's work on a worker: the seconds until the next one is due, ``None``: done."""

    def end(self) -> None:
        """After the last unit, on a worker: let go of what it holds (sockets)."""


class Running:
    """A member in the pool: woken by a command, stopped, ended."""

    def __init__(self) -> None:
        self.wake = asyncio.Event()  # set on the loop only
        self.halted = False
        self.reading: asyncio.Task[Any] | None = None  # the read under way
        self.ended = threading.Event()


class FleetPool:
    """The loop and the workers every member of one fleet runs on (see the module docstring)."""

    def __init__(self, workers: int = WORKERS) -> None:
        self.workers = workers
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="stepview-fleet-work")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="stepview-fleet-io", daemon=True)
        self._lock = threading.Lock()
        self._zmq: ZmqContext | None = None
        self._members: list[tuple[Unit, Running]] = []

    @property
    def zmq_context(self) -> ZmqContext:
        """The context the plug-in servers' subscribers share (made at the first ask): one
        I/O thread, and room for every member's sockets (three each, with the monitor)."""
        with self._lock:
            if self._zmq is None:
                context: ZmqContext = zmq.Context(io_threads=1)
                context.set(zmq.MAX_SOCKETS, min(context.get(zmq.SOCKET_LIMIT), 2**16))
                self._zmq = context
            return self._zmq

    def start(self) -> None:
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def add(self, unit: Unit) -> Running:
        """Run ``unit`` from now on (its first read at once)."""
        running = Running()
        with self._lock:
            self._members = [(u, r) for u, r in self._members if not r.ended.is_set()]
            self._members.append((unit, running))
        asyncio.run_coroutine_threadsafe(self._drive(unit, running), self._loop)
        return running

    def wake(self, running: Running) -> None:
        """Its next unit now (any thread)."""
        self._call(running.wake.set)

    def halt(self, running: Running) -> None:
        """Its read, if under way, cancelled, and its next unit now (any thread; the unit was
        asked to stop first, so that unit is its last)."""

        def halt() -> None:
            running.halted = True
            if running.reading is not None:
                running.reading.cancel()
            running.wake.set()

        self._call(halt)

    def halt_all(self) -> None:
        """Ask every member to stop, all at once (quitting: then each stop waits for little)."""
        with self._lock:
            members = list(self._members)
        for unit, running in members:
            unit.stop(0.0)
            self.halt(running)

    def stop(self, timeout: float = 5.0) -> None:
        """After the members stopped: the loop, the workers, the shared zmq context."""
        self._call(self._loop.stop)
        self._thread.join(timeout)
        self._executor.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            context, self._zmq = self._zmq, None
        if context is not None:
            context.destroy(linger=0)

    def _call(self, callback: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs any more
            self._loop.call_soon_threadsafe(callback)

    async def _drive(self, unit: Unit, running: Running) -> None:
        """``unit``'s units one after the other, each when due, until it is done."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                fetched = None
                if unit.reads and not running.halted:
                    reading = running.reading = asyncio.ensure_future(unit.fetch())
                    with contextlib.suppress(asyncio.CancelledError):
                        fetched = await reading
                    running.reading = None
                delay = await loop.run_in_executor(self._executor, unit.work, fetched)
                if delay is None:
                    return
                if delay > 0 and not running.wake.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay):
                            await running.wake.wait()
                else:
                    await asyncio.sleep(0)  # the others' turn on the loop first
                running.wake.clear()
        except Exception:
            log.exception("stepview: a fleet member's watch failed")
        finally:
            try:
                await loop.run_in_executor(self._executor, unit.end)
            except Exception:
                log.exception("stepview: a fleet member's watch did not end cleanly")
            running.ended.set()


class PooledSource:
    """A fleet member run by a :class:`FleetPool`, as a snapshot source (``start`` adds it to
    the pool; ``stop`` asks it to end and waits for its last unit). What a plug-in server's
    source says beyond the protocol (``read_only``, ``link``) is the member's own."""

    def __init__(self, unit: Unit, pool: FleetPool) -> None:
        self.unit = unit
        self._pool = pool
        self._running: Running | None = None

    @property
    def accepts_requests(self) -> bool:
        return self.unit.accepts_requests

    @property
    def read_only(self) -> str | None:
        return getattr(self.unit, "read_only", None)

    @property
    def link(self) -> Any:
        return getattr(self.unit, "link", None)

    def start(self) -> None:
        self._running = self._pool.add(self.unit)

    def latest(self) -> StepSnapshot:
        return self.unit.latest()

    def history(self) -> Sequence[StepSnapshot]:
        return self.unit.history()

    def send(self, command: Command) -> None:
        self.unit.send(command)
        if self._running is not None:
            self._pool.wake(self._running)

    def stop(self, timeout: float = 5.0) -> None:
        self.unit.stop(0.0)
        running = self._running
        if running is not None:
            self._pool.halt(running)
            running.ended.wait(timeout)

    @property
    def alive(self) -> bool:
        running = self._running
        return running is not None and not running.ended.is_set()
