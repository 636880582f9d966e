"""One watch of a fleet works at a time, and none while the fleet screen answers a key.

A fleet's watches run on a thread each (:mod:`stepview.launch.fleet`), in one process with the
fleet screen, and CPython runs one thread's Python at a time. The screen's thread wants the
interpreter lock back after every wait (each turn of its event loop), and waited behind every
runnable watch: at 64 busy servers a key took 5-10 s to show (a profile: ~50 % of the time in
the 48 plug-in watches, ~36 % parsing the 16 ``/metrics`` pages, ~7 % drawing; a shorter
switch interval made it worse). The watches of a fleet now share one :class:`FleetTurn`: a
watch holds it while it works (a driver reading, applying and publishing a step; a ``/metrics``
watch reading a page into figures) and never while it waits (for its pace, a command, the
server's answer), so at most one of them competes with the screen for the lock, whatever the
size of the fleet. A key on the fleet screen (:meth:`FleetTurn.give_way`) keeps the turn from
every watch for a moment: the screen answers it with the process to itself, even on a machine
whose CPU the servers take (the watches, paced, read what came meanwhile as one record).

A lock, not a thread polling every socket: the watches stay the very watches a single
``--attach`` gives (their driver, their reconnects, their catch-up) and only take turns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

GIVE_WAY_S = 0.5
"""How long a key on the fleet screen keeps the watches out of their turn: what a key's
redraw of 64 rows takes on a starved, niced stepview (the screen's poll alone is 30-60 ms)."""


class FleetTurn:
    """The turn a fleet's watches take one at a time (``with turn:``; re-entrant in a thread)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._owner: int | None = None  # the thread holding it; set and cleared by that thread
        self._depth = 0
        self._screen_until = 0.0  # no watch takes the turn before then (the clock's time)

    def __enter__(self) -> None:
        me = threading.get_ident()
        if self._owner != me:
            while (left := self._screen_until - self._clock()) > 0:
                self._sleep(left)  # the screen answers a key: the turn is its alone
            self._lock.acquire()
            self._owner = me
        self._depth += 1

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if not self._depth:
            self._owner = None
            self._lock.release()

    def give_way(self, seconds: float = GIVE_WAY_S) -> None:
        """The screen's thread, on a key: for ``seconds`` no watch starts working (the one at
        work finishes what it does, bounded: a step reads for at most 0.1 s)."""
        self._screen_until = max(self._screen_until, self._clock() + seconds)
