"""A :class:`~stepview.engine.watch.metrics.metrics_watch.MetricsWatch` on a thread of its own,
as the TUI's snapshot source (``stepview --attach http://HOST:PORT``).

The TUI pulls :meth:`MetricsSource.latest`; a thread scrapes every ``interval`` seconds and
swaps in the newest snapshot, as the driver does for an engine. There is nothing to add or
abort (the server tells no request apart): the add form says why. Pause holds the view, as
for any watched server, while the scrapes go on so the window stays whole; a single step
shows the next scrape.

A large fleet runs it in a pool instead (:mod:`~stepview.engine.watch.fleet.fleet_pool`): the
page read on the pool's event loop (:meth:`MetricsSource.fetch`), read into figures on one of
its workers (:meth:`MetricsSource.work`), no thread of its own.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

from stepview.engine.watch.api.async_get import get_text
from stepview.engine.watch.api.server_api import ApiError
from stepview.engine.watch.metrics.metrics_watch import SCRAPE_TIMEOUT_S, MetricsWatch
from stepview.model.commands import Command, Pause, Resume, SingleStep
from stepview.model.snapshot import EngineState, StepSnapshot

RETRY_MAX_S = 16.0
"""A pooled watch's back-off after failed reads: the interval doubled each time, up to this."""
READ_ONLY = (
    "Watching the server's /metrics: it names no request, so nothing can be added or aborted "
    "here. Restart it with stepview's plug-in for the per-request view (the line is on screen)."
)


class MetricsSource:
    """The snapshot source of one server watched through its ``/metrics``."""

    accepts_requests = False
    read_only = READ_ONLY
    reads = True  # pooled, its page is read on the pool's event loop

    def __init__(self, watch: MetricsWatch, *, interval: float, history: int) -> None:
        self.watch = watch
        self.interval = interval
        self._latest = watch.latest
        self._history: deque[StepSnapshot] = deque(maxlen=history)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._paused = False
        self._steps = 0  # single steps asked for while paused
        self._began = 0.0  # when the pool's last read began (monotonic)
        self._asked_at = 0.0  # ... on the wall clock
        self.read_at: float | None = None
        """The wall clock of the last read that got a page of vLLM's: the moment its figures
        describe (a fleet's headless line says it)."""
        self._failures = 0  # reads failed in a row, for the pool's back-off
        self._thread = threading.Thread(target=self._run, name="stepview-metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def latest(self) -> StepSnapshot:
        return self._latest

    def history(self) -> Sequence[StepSnapshot]:
        with self._lock:
            return tuple(self._history)

    def send(self, command: Command) -> None:
        with self._lock:
            if isinstance(command, Pause):
                self._paused = True
                self._latest = replace(self._latest, engine_state=EngineState.PAUSED)
            elif isinstance(command, Resume):
                self._paused = False
            elif isinstance(command, SingleStep) and self._paused:
                self._steps += 1

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            began, asked_at = time.monotonic(), time.time()
            self._show(self.watch.scrape(), asked_at)
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - began)))

    def _show(self, scraped: StepSnapshot, asked_at: float) -> None:
        """A scrape's snapshot (of a read asked at ``asked_at``, wall clock), shown unless the
        view is held (or as a single step)."""
        if scraped.engine_state not in (EngineState.STARTING, EngineState.DISCONNECTED):
            self.read_at = asked_at
        with self._lock:
            shown: StepSnapshot | None = scraped
            if self._paused and self._steps:
                self._steps -= 1
                shown = replace(scraped, engine_state=EngineState.PAUSED)
            elif self._paused:
                shown = None  # the view is held
            if shown is not None:
                if shown.engine_state is not EngineState.STARTING:
                    self._history.append(shown)
                self._latest = shown

    # -- run by a pool (a large fleet's: no thread of its own) ---------------------------------

    async def fetch(self) -> tuple[float, str | ApiError]:
        """The page read on the pool's event loop (no thread waits for it), with its time."""
        self._began, self._asked_at = time.monotonic(), time.time()
        clock = self.watch.moment()
        try:
            return clock, await get_text(self.watch.api, "/metrics", SCRAPE_TIMEOUT_S)
        except ApiError as exc:
            return clock, exc

    def work(self, fetched: tuple[float, str | ApiError]) -> float | None:
        """The page read into figures (on a pool's worker); the seconds until the next read:
        the interval, or after a failed one a back-off that doubles up to :data:`RETRY_MAX_S`
        (a server down costs a connection refused, one hung a socket until its timeout, now
        and then); ``None`` once stopped."""
        if self._stop.is_set():
            return None
        scraped = self.watch.absorb(*fetched)
        self._show(scraped, self._asked_at)
        if scraped.engine_state in (EngineState.STARTING, EngineState.DISCONNECTED):
            self._failures += 1
            return min(self.interval * 2.0**self._failures, max(self.interval, RETRY_MAX_S))
        self._failures = 0
        return max(0.0, self.interval - (time.monotonic() - self._began))

    def end(self) -> None:
        self.watch.close()
