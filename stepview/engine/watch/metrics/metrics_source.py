"""A :class:`~stepview.engine.watch.metrics.metrics_watch.MetricsWatch` on a thread of its own,
as the TUI's snapshot source (``stepview --attach http://HOST:PORT``).

The TUI pulls :meth:`MetricsSource.latest`; a thread scrapes every ``interval`` seconds and
swaps in the newest snapshot, as the driver does for an engine. There is nothing to add or
abort (the server tells no request apart): the add form says why. Pause holds the view, as
for any watched server, while the scrapes go on so the window stays whole; a single step
shows the next scrape.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

from stepview.engine.watch.metrics.metrics_watch import MetricsWatch
from stepview.model.commands import Command, Pause, Resume, SingleStep
from stepview.model.snapshot import EngineState, StepSnapshot

READ_ONLY = (
    "Watching the server's /metrics: it names no request, so nothing can be added or aborted "
    "here. Restart it with stepview's plug-in for the per-request view (the line is on screen)."
)


class MetricsSource:
    """The snapshot source of one server watched through its ``/metrics``."""

    accepts_requests = False
    read_only = READ_ONLY

    def __init__(self, watch: MetricsWatch, *, interval: float, history: int) -> None:
        self.watch = watch
        self.interval = interval
        self._latest = watch.latest
        self._history: deque[StepSnapshot] = deque(maxlen=history)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._paused = False
        self._steps = 0  # single steps asked for while paused
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
            began = time.monotonic()
            scraped = self.watch.scrape()
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
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - began)))
