"""The driver's figures of the steps so far: what the status bar, the sparklines and a run's
totals show, kept apart from the loop (:mod:`~stepview.engine.driver.loop`) that feeds them.

Per step this is O(1): the last step's counters, budget and queue reasons as the engine told
them, one :class:`~stepview.model.snapshot.RecentStep` appended to a bounded window, and the
clocks a run's totals (:class:`~stepview.engine.driver.run_stats.RunStats`) are made of.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from stepview.engine.driver.run_stats import RunStats
from stepview.model.engine_api import StepResult
from stepview.model.scheduling import StepBudget, WaitReason
from stepview.model.snapshot import EngineCounters, RecentStep

# Steps kept for the sparklines.
RECENT_STEPS = 120


class StepFigures:
    """The figures of the steps an engine made, on the driver's ``clock`` (one thread)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.recent: deque[RecentStep] = deque(maxlen=RECENT_STEPS)
        self.step = 0
        self.step_time = 0.0  # the last step's (or, watched, the time between its steps)
        self.counters = EngineCounters()
        self.total_generated = 0
        self.budget: StepBudget | None = None  # the last step's, when the engine tells
        self.queue_reasons: tuple[WaitReason | None, ...] = ()  # ditto, per engine core
        self._stepping_time = 0.0  # sum of step() wall times: the engine's share of the run
        self._first_step_at: float | None = None  # clock() when the first step() began
        self._last_step_end = 0.0  # clock() when the latest step() returned
        self._first_step_cpu = 0.0  # thread_time() then, and ...
        self._last_step_cpu = 0.0  # ... when the latest step() returned
        self.thread_cpu: Callable[[], float] | None = time.thread_time
        """The driver thread's CPU clock; ``None`` for a driver whose turns run on whichever
        thread of a pool is free (a fleet's): one thread's clock against another's would
        mean nothing, and a read of it was 4 % of a fleet of a thousand's CPU."""

    def begin(self) -> float:
        """A ``step()`` call begins: when (the driver's clock)."""
        start = self._clock()
        if self._first_step_at is None:
            self._first_step_at = start
            if self.thread_cpu is not None:
                self._first_step_cpu = self._last_step_cpu = self.thread_cpu()
        return start

    def end(self, start: float, end: float, result: StepResult) -> None:
        """The ``step()`` call that began at ``start`` returned ``result`` at ``end``."""
        self._last_step_end = end
        if self.thread_cpu is not None:
            self._last_step_cpu = self.thread_cpu()
        self.step_time = end - start if result.interval is None else result.interval
        self._stepping_time += self.step_time
        self.step += 1

    def dated(self, now: float, age: float) -> float:
        """When a step ``age`` seconds old at ``now`` happened: in order, never before the
        last one (a watched engine's steps are read a little later, sometimes together)."""
        if not age:
            return now
        return max(now - age, self.recent[-1].clock if self.recent else 0.0)

    def fold(self, result: StepResult, now: float) -> None:
        """The step's figures, dated ``now``."""
        counters = self.counters = result.counters
        self.budget = result.budget
        if result.queue_reasons != self.queue_reasons:
            self.queue_reasons = result.queue_reasons
        self.total_generated += counters.generation_tokens
        self.recent.append(
            RecentStep(
                step=self.step,
                clock=now,
                step_time=self.step_time,
                running=counters.running,
                waiting=counters.waiting,
                kv_cache_usage=counters.kv_cache_usage,
                generation_tokens=counters.generation_tokens,
            )
        )

    def emptied(self) -> None:
        """The engine holds nothing any more and no step will say so: none running."""
        self.counters = replace(self.counters, running=0, waiting=0, kv_cache_usage=0.0)

    def run_stats(self, requests_done: int, since_start: float) -> RunStats:
        """Totals so far."""
        first = self._first_step_at
        return RunStats(
            steps=self.step,
            requests_done=requests_done,
            tokens_generated=self.total_generated,
            stepping_time=self._stepping_time,
            busy_span=0.0 if first is None else self._last_step_end - first,
            since_start=since_start,
            busy_cpu=self._last_step_cpu - self._first_step_cpu,
        )
