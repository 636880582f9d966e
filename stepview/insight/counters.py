"""The engine's figures step by step (KV usage, batch, queue, tokens), kept for an export.

The snapshots' ``recent`` strip holds only the last steps, and a live run keeps a short
history; a Chrome trace of the whole run needs every step's figures. :class:`CounterSeries` is
fed every snapshot by :class:`~stepview.insight.run.RunInsight` (live, or over a trace) and
keeps one small record per step, so an export at the end of a run does not need the run's
snapshots. It is only kept when an export asks for it (a long TUI run would otherwise carry
a record per step for nothing).
"""

from __future__ import annotations

from typing import NamedTuple

from stepview.model.snapshot import StepSnapshot


class CounterPoint(NamedTuple):
    """One engine step: when it ran (driver clock) and vLLM's figures for it.

    ``running``, ``waiting`` and ``kv_usage`` are the scheduler's state after the step;
    ``prefill_tokens``/``decode_tokens`` the work done in it.
    """

    step: int
    start: float
    end: float
    kv_usage: float  # 0..1
    running: int
    waiting: int
    prefill_tokens: int
    decode_tokens: int


class CounterSeries:
    """Every step's :class:`CounterPoint`, in order; fed every snapshot, one point per step.

    A step's first snapshot carries its figures; the snapshots between steps (commands)
    repeat them and are skipped. The start is the one the timelines use (the snapshot's clock
    less the step's time, never before the previous step ended), so spans and counters line
    up in the export.
    """

    def __init__(self) -> None:
        self.points: list[CounterPoint] = []
        self._step = 0
        self._clock = 0.0

    def observe(self, snapshot: StepSnapshot) -> None:
        if snapshot.step != self._step and snapshot.step > 0:
            counters = snapshot.counters
            self.points.append(
                CounterPoint(
                    snapshot.step,
                    max(self._clock, snapshot.clock - snapshot.step_time),
                    snapshot.clock,
                    counters.kv_cache_usage,
                    counters.running,
                    counters.waiting,
                    counters.prompt_tokens,
                    counters.generation_tokens,
                )
            )
        self._step = snapshot.step
        self._clock = snapshot.clock
