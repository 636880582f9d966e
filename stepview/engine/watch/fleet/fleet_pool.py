"""A fleet's watches on a bounded number of threads: one event loop and a few workers.

A thread per server (each ``/metrics`` watch, each plug-in server's driver) made a fleet of 400
hold 402 threads, a server down or hung one of them parked for its timeout, and every zmq
subscriber a context with an I/O thread of its own. :class:`FleetPool` runs them all on
:data:`WORKERS` worker threads and one asyncio loop (its thread: ``stepview-fleet-io``),
whatever the fleet's size:

* each member is a :class:`Unit`: its next unit of work is an optional read that waits for the
  network (:meth:`Unit.fetch`, a coroutine on the loop: a ``/metrics`` page; no thread waits
  for it, a server down or hung costs a socket and a timer), then the work on what was read
  (:meth:`Unit.work`, on a worker: a page read into figures, a turn of a plug-in server's
  driver), which says when the next is due (its interval, its pace, or a back-off after a
  failure). A member is in one place at a time (due, being read, being worked on), so its work
  runs on one worker at a time, never two at once: the driver's contract (one thread at a time
  calls the engine) holds for a pooled driver;
* the workers take the members as they come due, the earliest first (:class:`Schedule`): a
  worker that finishes a unit takes the next one due without waiting, and while they are all
  busy, or none is due, one of them (the *leader*) sleeps until the next is, the others until
  it is taken. At a thousand servers that is a few thousand units a second: each costs a heap
  push and pop, where a coroutine per member that handed every unit to an executor and back
  (futures, a wake of the loop, a timer) cost several times the work of a plug-in server's turn;
* a command sent to a member (the server's full view pausing it, say) brings its next unit
  forward to now (:meth:`FleetPool.wake`); a member stopped has its read, if one is under way,
  cancelled;
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
import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Sequence
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
    """A member in the pool, and where it is: due (in the schedule), being read (on the
    loop) or worked on (by a worker); woken by a command, stopped, ended."""

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.ticket = 0  # its entry in the schedule that counts (older ones are stale)
        self.due = False  # in the schedule, waiting for its time
        self.woken = False  # a command came while it was away: its next unit at once
        self.halted = False
        self.fetched: Any = None  # what its read brought, for its work
        self.read = False  # its read is done: its work is next
        self.failed = False  # its read failed unexpectedly: it ends
        self.reading: asyncio.Task[Any] | None = None  # the read under way (the loop's)
        self.came_due = 0.0  # when the unit it was last taken for came due (monotonic)
        self.ended = threading.Event()


class Schedule:
    """The members due, the earliest first, and the workers waiting for them (one lock).

    One waiting worker, the leader, sleeps until the earliest member is due; the others sleep
    until a member is handed to them or the leader leaves to work. A member that comes due
    sooner than the leader's wake wakes the leader; a worker that takes a member while
    others are due, or with no leader left, wakes another."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leader = threading.Condition(self._lock)
        self._others = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, int, Running]] = []
        self._order = itertools.count()
        self._leading_until: float | None = None  # the leader's wake (None: no leader)
        self._closed = False

    def put(self, running: Running, at: float) -> None:
        """``running`` due at ``at`` (monotonic), replacing any earlier entry of it."""
        with self._lock:
            self._put(running, at)

    def _put(self, running: Running, at: float) -> None:
        running.ticket += 1
        running.due = True
        heapq.heappush(self._heap, (at, next(self._order), running.ticket, running))
        if self._heap[0][3] is not running:
            return  # not the earliest: whoever times the earliest comes to it in turn
        if self._leading_until is None:
            self._others.notify()
        elif at < self._leading_until:
            self._leader.notify()

    def wake(self, running: Running) -> None:
        """``running``'s next unit now: brought forward if due later, else once back."""
        with self._lock:
            if running.due:
                self._put(running, 0.0)
            else:
                running.woken = True

    def back(self, running: Running, delay: float, since: float | None = None) -> None:
        """``running`` back from its work (or its read): due in ``delay`` s, at once if woken
        meanwhile. At once is now, behind those already due: a member with more to read
        takes its turns among the others, never before them. ``since``: the moment the delay
        counts from instead of now (a read's: see :meth:`FleetPool._was_read`)."""
        with self._lock:
            if running.woken or running.halted:
                running.woken, delay = False, 0.0
            start = time.monotonic() if since is None else since
            self._put(running, start + max(0.0, delay))

    def take(self) -> Running | None:
        """The next member due, once it is (waiting for it); ``None`` once closed."""
        with self._lock:
            heap = self._heap
            while not self._closed:
                while heap and heap[0][2] != heap[0][3].ticket:
                    heapq.heappop(heap)  # a stale entry: the member was brought forward
                now = time.monotonic()
                if heap and heap[0][0] <= now:
                    came_due, _, _, running = heapq.heappop(heap)
                    running.due, running.came_due = False, came_due
                    if heap and (self._leading_until is None or heap[0][0] <= now):
                        self._others.notify()  # someone to time the rest, or to take it
                    return running
                if self._leading_until is not None:
                    self._others.wait()
                    continue
                self._leading_until = heap[0][0] if heap else math.inf
                try:
                    self._leader.wait(self._leading_until - now if heap else None)
                finally:
                    self._leading_until = None
            return None

    def close(self) -> None:
        """Every worker's :meth:`take` answers ``None`` from now on."""
        with self._lock:
            self._closed = True
            self._leader.notify_all()
            self._others.notify_all()


class FleetPool:
    """The loop and the workers every member of one fleet runs on (see the module docstring)."""

    def __init__(self, workers: int = WORKERS) -> None:
        self.workers = workers
        self._schedule = Schedule()
        self._workers = [
            threading.Thread(target=self._work, name=f"stepview-fleet-work_{i}", daemon=True)
            for i in range(workers)
        ]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="stepview-fleet-io", daemon=True)
        self._lock = threading.Lock()
        self._zmq: ZmqContext | None = None
        self._members: list[Running] = []

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
        for worker in self._workers:
            worker.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def add(self, unit: Unit) -> Running:
        """Run ``unit`` from now on (its first unit at once)."""
        running = Running(unit)
        with self._lock:
            self._members = [r for r in self._members if not r.ended.is_set()]
            self._members.append(running)
        self._schedule.put(running, 0.0)
        return running

    def wake(self, running: Running) -> None:
        """Its next unit now (any thread)."""
        self._schedule.wake(running)

    def halt(self, running: Running) -> None:
        """Its read, if under way, cancelled, and its next unit now (any thread; the unit was
        asked to stop first, so that unit is its last)."""
        running.halted = True
        self._call(lambda: running.reading is not None and running.reading.cancel())
        self._schedule.wake(running)

    def halt_all(self) -> None:
        """Ask every member to stop, all at once (quitting: then each stop waits for little)."""
        with self._lock:
            members = list(self._members)
        for running in members:
            running.unit.stop(0.0)
            self.halt(running)

    def stop(self, timeout: float = 5.0) -> None:
        """After the members stopped: the workers, the loop, the shared zmq context."""
        deadline = time.monotonic() + timeout
        self._schedule.close()
        for worker in self._workers:
            if worker.is_alive():
                worker.join(max(0.0, deadline - time.monotonic()))
        self._call(self._loop.stop)
        self._thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            context, self._zmq = self._zmq, None
        if context is not None:
            context.destroy(linger=0)

    def _call(self, callback: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs any more
            self._loop.call_soon_threadsafe(callback)

    # -- the workers, and the reads on the loop -------------------------------------------------

    def _work(self) -> None:
        """A worker: the members' units as they come due, until the pool stops."""
        while (running := self._schedule.take()) is not None:
            unit = running.unit
            if unit.reads and not (running.read or running.halted or running.failed):
                self._call(lambda running=running: self._read(running))  # its work once read
                continue
            fetched, running.fetched, running.read = running.fetched, None, False
            delay = None
            if not running.failed:
                try:
                    delay = unit.work(fetched)
                except Exception:
                    log.exception("stepview: a fleet member's watch failed")
            if delay is None:
                self._end(running)
            else:
                self._schedule.back(running, delay)

    def _read(self, running: Running) -> None:
        """On the loop: ``running``'s read started; its work is due once it is done."""
        if running.halted:
            self._schedule.back(running, 0.0)  # its work ends it: nothing to read
            return
        reading = running.reading = asyncio.ensure_future(running.unit.fetch(), loop=self._loop)
        reading.add_done_callback(lambda done: self._was_read(running, done))

    def _was_read(self, running: Running, done: asyncio.Task[Any]) -> None:
        running.reading = None
        running.fetched, running.read = None, True
        if not done.cancelled():
            if (failed := done.exception()) is None:
                running.fetched = done.result()
            else:
                log.error("stepview: a fleet member's watch failed", exc_info=failed)
                running.failed = True
        # Its work is due when its read came due, ahead of the turns that came due since: the
        # two are one unit, and what was read ages until it is shown (a plug-in server's turn
        # reads when it runs). At a thousand servers, pages waited here as long again as they
        # had waited for their read (0.56 s, p50).
        self._schedule.back(running, 0.0, since=running.came_due)

    def _end(self, running: Running) -> None:
        """After its last unit: what it holds let go, on this worker."""
        try:
            running.unit.end()
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

    @property
    def read_at(self) -> float | None:
        """The wall clock of the member's last read of its server (None: none yet)."""
        return getattr(self.unit, "read_at", None)

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
