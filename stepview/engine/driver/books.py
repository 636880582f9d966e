"""The driver thread's books, and ending a run whose engine never gives the thread back.

An engine can stop answering: a hung kernel, or an engine core in its own process that hangs
or is stopped (``kill -STOP``). vLLM's client then waits for that core's outputs with no
timeout, and the driver thread never comes back from ``step()``. Everything a run records
(the ledger, the step figures, the sinks: its *books*) is kept by that thread alone, so once
the stop deadline is over another thread may take them over only if the driver thread is
known to be away in the engine and to touch nothing when it comes back.

:class:`Books` is that agreement, a lock: the driver thread holds it whenever it is not waiting
on the engine (:meth:`Books.away` frees it around a step, the start-up, the shutdown), and on
coming back checks :attr:`Books.abandoned`. :meth:`~stepview.engine.driver.loop.Driver.abandon`
takes it, records the end of the run as a timely stop would (requests in flight unfinished, the
files closed), and marks the books abandoned. Two lock operations per step: ~0.1 µs.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from types import TracebackType


class Books:
    """The lock on a driver's books, and what became of them (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.abandoned = False
        """The run was ended by another thread: the driver thread records nothing more."""
        self.closed = False
        """The run's end is recorded (sinks closed): nothing more is published."""

    def __enter__(self) -> Books:
        self._lock.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()

    @contextlib.contextmanager
    def away(self) -> Iterator[None]:
        """Around an engine call that may never return, made holding the books: they are free
        for another thread meanwhile (check :attr:`abandoned` after)."""
        self._lock.release()
        try:
            yield
        finally:
            self._lock.acquire()

    @contextlib.contextmanager
    def taken(self, timeout: float) -> Iterator[bool]:
        """Hold the books from another thread, if the driver thread lets go of them within
        ``timeout`` s (it does at once when it waits on the engine); yields whether it did."""
        held = self._lock.acquire(timeout=timeout)
        try:
            yield held
        finally:
            if held:
                self._lock.release()
