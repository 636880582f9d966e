"""The driver's way in: the commands other threads send, and the requests due later.

Kept apart from :mod:`~stepview.engine.driver.loop` as :mod:`~stepview.engine.driver.publishing`
is: these are the two places where the driver thread meets the others. Any thread may
:meth:`Inbox.send` (a lock-free queue, so no caller ever waits on a step); only the driver
thread takes. The requests a :class:`~stepview.model.commands.Schedule` dates for later wait
in :attr:`Inbox.arrivals`, and an idle driver waits for a command no longer than the next of
them, so a request is added when its time comes and no step ever waits for one.

A watched engine that can wake the driver when a record arrives
(:class:`~stepview.model.engine_api.RecordWait`) is waited on together with the commands:
the idle driver then sleeps in the engine's wait, and a command sent meanwhile wakes it
through a pipe (written only while the driver sleeps there, so a command costs no system
call otherwise).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Iterator

from stepview.engine.driver.arrivals import ArrivalQueue
from stepview.model.commands import Command
from stepview.model.engine_api import RecordWait

IDLE_WAIT_S = 0.05  # how long the loop blocks on the command queue with nothing to step


class Inbox:
    """Commands in the order they were sent, and the requests scheduled to arrive later."""

    def __init__(self, now: Callable[[], float]) -> None:
        """``now``: the driver's clock, which the arrivals are dated on."""
        self._now = now
        self._queue: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self.arrivals = ArrivalQueue()
        self._records: RecordWait | None = None
        self._bell: tuple[int, int] | None = None  # a pipe (read end, write end)
        self._asleep = False  # the driver sleeps in the engine's wait: ring to wake it
        self._bell_lock = threading.Lock()  # a ring never meets the pipe's closing

    def wait_on(self, records: RecordWait) -> None:
        """From now on an idle driver also wakes when ``records`` has one (driver thread)."""
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        self._bell, self._records = (read, write), records

    def send(self, command: Command) -> None:
        """Any thread: the command is handled at the driver thread's next look."""
        self._queue.put(command)
        if self._asleep:
            with self._bell_lock, contextlib.suppress(OSError):  # full: it rings already
                if self._bell is not None:
                    os.write(self._bell[1], b"\0")

    def take(self, block: bool, records: bool = False) -> Iterator[Command]:
        """Each command sent so far, oldest first, taken as it is asked for (one the driver
        has not got to yet stays queued); when ``block``, wait a little for the first one
        (not past the next scheduled arrival), or, with ``records``, for the watched engine's
        next record."""
        if block:
            timeout = self.arrivals.wait(self._now(), IDLE_WAIT_S)
            if records and self._records is not None and self._bell is not None:
                self._sleep(self._records, self._bell[0], timeout)
            else:
                try:
                    yield self._queue.get(timeout=timeout)
                except queue.Empty:
                    return
        while True:
            try:
                yield self._queue.get_nowait()
            except queue.Empty:
                return

    def _sleep(self, records: RecordWait, bell: int, timeout: float) -> None:
        """Wait in the engine's wait, unless a command is in already (one sent before
        :attr:`_asleep` was set is seen here, one sent after rings)."""
        self._asleep = True
        try:
            if self._queue.empty():
                records.wait_for_records(timeout, bell)
        finally:
            self._asleep = False
        with contextlib.suppress(OSError):
            while os.read(bell, 4096):
                pass

    def close(self) -> None:
        """Let go of the pipe (driver thread, at the end of the run)."""
        with self._bell_lock:
            bell, self._bell, self._records = self._bell, None, None
        if bell is not None:
            for fd in bell:
                os.close(fd)
