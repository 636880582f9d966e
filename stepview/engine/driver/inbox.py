"""The driver's way in: the commands other threads send, and the requests due later.

Kept apart from :mod:`~stepview.engine.driver.loop` as :mod:`~stepview.engine.driver.publishing`
is: these are the two places where the driver thread meets the others. Any thread may
:meth:`Inbox.send` (a lock-free queue, so no caller ever waits on a step); only the driver
thread takes. The requests a :class:`~stepview.model.commands.Schedule` dates for later wait
in :attr:`Inbox.arrivals`, and an idle driver waits for a command no longer than the next of
them, so a request is added when its time comes and no step ever waits for one.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator

from stepview.engine.driver.arrivals import ArrivalQueue
from stepview.model.commands import Command

IDLE_WAIT_S = 0.05  # how long the loop blocks on the command queue with nothing to step


class Inbox:
    """Commands in the order they were sent, and the requests scheduled to arrive later."""

    def __init__(self, now: Callable[[], float]) -> None:
        """``now``: the driver's clock, which the arrivals are dated on."""
        self._now = now
        self._queue: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self.arrivals = ArrivalQueue()

    def send(self, command: Command) -> None:
        """Any thread: the command is handled at the driver thread's next look."""
        self._queue.put(command)

    def take(self, block: bool) -> Iterator[Command]:
        """Each command sent so far, oldest first, taken as it is asked for (one the driver
        has not got to yet stays queued); when ``block``, wait a little for the first one
        (not past the next scheduled arrival)."""
        if block:
            try:
                yield self._queue.get(timeout=self.arrivals.wait(self._now(), IDLE_WAIT_S))
            except queue.Empty:
                return
        while True:
            try:
                yield self._queue.get_nowait()
            except queue.Empty:
                return
