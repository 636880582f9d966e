"""A plug-in server's driver run by a fleet's pool, a turn at a time, instead of on a thread.

The watch of a plug-in server in a fleet is the :class:`~stepview.engine.driver.loop.Driver`
a single ``--attach tcp://…`` gives it, over a watched engine whose sockets are read without
waiting. :class:`PooledDriver` is that driver as a pool's
:class:`~stepview.engine.watch.fleet.fleet_pool.Unit`: its first unit opens it
(:meth:`Driver.open`: the subscriber connects in the background), each unit is one turn of
its loop (:meth:`Driver.advance`), the next due at the watch's pace (the fleet reads what came
every :data:`~stepview.engine.watch.link.backlog.FLEET_READ_S`, or seldomer in a large fleet:
the fleet's own pace, :func:`~stepview.engine.watch.link.backlog.fleet_read_every`; at once
while there is more; every :data:`~stepview.engine.driver.inbox.IDLE_WAIT_S` while the
server's full view is open, which reads each step), sooner when a command comes. A server
not reached, or lost, is looked at less and less often (zmq reconnects by itself meanwhile):
the pace doubled after each look that found it so, up to :data:`LOOK_MAX_S`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from stepview.engine.driver.loop import Driver
from stepview.model.commands import Command, Shutdown
from stepview.model.engine_api import LinkState
from stepview.model.snapshot import EngineState, StepSnapshot

LOOK_MAX_S = 4.0
"""How seldom, at most, a plug-in server not reached (or lost) is looked at."""
_UNREACHED = (EngineState.STARTING, EngineState.DISCONNECTED)


class Pace(Protocol):
    """How often the watch reads what came (the fleet's ``ReadPace``; 0: each step)."""

    every: float


class PooledDriver:
    """``driver`` (not started) as a pool's unit, reading at ``pace``, and no more often than
    the ``fleet``'s pace (its size's) while reading at a pace at all."""

    reads = False  # the sockets are read in the work itself: they never block

    def __init__(self, driver: Driver, pace: Pace, fleet: Pace | None = None) -> None:
        self.driver = driver
        self.pace = pace
        self.fleet = fleet
        self._opened = False
        self._unreached = 0  # looks in a row that found it not reached
        self.read_at: float | None = None
        """The wall clock of the last turn that read its records with the link up: what it
        knew of the server then is what it shows (a fleet's headless line says it)."""

    @property
    def accepts_requests(self) -> bool:
        return self.driver.accepts_requests

    @property
    def read_only(self) -> str | None:
        return self.driver.read_only

    @property
    def link(self) -> LinkState | None:
        return self.driver.link

    def latest(self) -> StepSnapshot:
        return self.driver.latest()

    def history(self) -> Sequence[StepSnapshot]:
        return self.driver.history()

    def send(self, command: Command) -> None:
        self.driver.send(command)

    def stop(self, timeout: float = 5.0) -> None:
        self.driver.send(Shutdown())  # its next turn ends the run

    async def fetch(self) -> None:
        return None

    def work(self, fetched: object) -> float | None:
        if not self._opened:
            self._opened = True
            self.driver.open()
        began = time.time()
        delay = self.driver.advance()
        link = self.driver.link
        reached = link is not None and link.state not in _UNREACHED
        if reached:
            self.read_at = began
        every = self.pace.every
        if delay is None or delay == 0 or not every:
            return delay  # over, more read than reported yet, or each step (its full view)
        if self.fleet is not None:
            every = max(every, self.fleet.every)
        if not reached:
            self._unreached += 1
            return min(every * 2.0**self._unreached, max(every, LOOK_MAX_S))
        self._unreached = 0
        return every

    def end(self) -> None:
        self.driver.close()
