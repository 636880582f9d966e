"""Detectors that turn snapshots into alerts: a request thrashing, the engine stalled.

* **thrash** — one request preempted ``thrash_after`` times or more, or its prefill progress
  lost that often (re-prefilling in a loop): it costs the engine its prompt again and again.
* **stall** — requests wait in the engine and no token at all was scheduled for
  ``stall_steps`` steps in a row.
* **kv_full** — the KV cache is at least ``kv_full`` used and no output token came out for
  ``stall_steps`` steps: requests take turns evicting each other and nothing progresses.

Pure and incremental: :meth:`Watchdogs.observe` takes the snapshot and the timelines that
changed in it (:class:`~stepview.insight.timeline.TimelineTracker`), so it costs O(1) per step
plus O(changed requests). An alert stays in :attr:`Watchdogs.current` while it holds and is
listed once in :attr:`Watchdogs.raised`; the current tuple is the same object while nothing
changes, so the snapshots it goes into share it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from stepview.insight.timeline import RequestTimeline
from stepview.model.alerts import KV_FULL, STALL, STUCK, THRASH, Alert
from stepview.model.snapshot import StepSnapshot, oldest_waiting

RAISED_KEPT = 1000


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When the detectors fire (the defaults suit a real engine; tests lower them)."""

    thrash_after: int = 3  # preemptions (or lost prefills) of one request
    stall_steps: int = 8  # consecutive steps without progress
    kv_full: float = 0.98  # KV cache usage counted as full (0..1)
    stuck_after: float | None = None  # seconds a request may wait (None: no limit)


class Watchdogs:
    """The thrash detector and the stall watchdogs, fed one snapshot at a time."""

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.thresholds = thresholds or Thresholds()
        self.current: tuple[Alert, ...] = ()
        # Every alert raised, the latest RAISED_KEPT of them (a week's watch may raise
        # thousands; each one is in the trace and the log too).
        self.raised: deque[Alert] = deque(maxlen=RAISED_KEPT)
        self.raised_count = 0
        self._active: dict[tuple[str, str | None], Alert] = {}
        self._step = 0
        self._generated = 0
        self._idle_steps = 0  # steps with requests waiting and nothing scheduled
        self._full_steps = 0  # steps with the KV cache full and no output token
        self._stuck: str | None = None  # the request the stuck alert is about

    def observe(
        self, snapshot: StepSnapshot, changed: Iterable[RequestTimeline]
    ) -> tuple[Alert, ...]:
        """The alerts that hold after this snapshot."""
        dirty = False
        for timeline in changed:
            dirty |= self._thrash(snapshot, timeline)
        if snapshot.step != self._step:
            dirty |= self._watch(snapshot)
            self._step = snapshot.step
        elif self.thresholds.stuck_after is not None:  # no step: a server gone quiet waits too
            dirty |= self._watch_stuck(snapshot, self.thresholds.stuck_after)
        self._generated = snapshot.total_generated
        if dirty:
            self.current = tuple(self._active.values())
        return self.current

    def _raise(self, alert: Alert) -> bool:
        if alert.key in self._active:
            return False
        self._active[alert.key] = alert
        self.raised.append(alert)
        self.raised_count += 1
        return True

    def _clear(self, kind: str, request_id: str | None = None) -> bool:
        return self._active.pop((kind, request_id), None) is not None

    def _thrash(self, snapshot: StepSnapshot, timeline: RequestTimeline) -> bool:
        rid = timeline.request_id
        if timeline.done:
            return self._clear(THRASH, rid)
        times = max(len(timeline.preemptions), timeline.restarts)
        if times < self.thresholds.thrash_after:
            return False
        if timeline.preemptions:
            text = (
                f"{rid} thrashing: preempted {len(timeline.preemptions)} times, "
                f"{timeline.tokens_lost} computed tokens lost"
            )
        else:
            text = f"{rid} thrashing: prefill restarted {times} times"
        return self._raise(Alert(THRASH, snapshot.step, snapshot.clock, text, rid))

    def _watch(self, snapshot: StepSnapshot) -> bool:
        """The run-wide watchdogs, once per engine step."""
        limit = self.thresholds.stall_steps
        counters = snapshot.counters
        scheduled = counters.prompt_tokens + counters.generation_tokens
        budget = snapshot.budget
        if budget is not None:
            scheduled = max(scheduled, budget.prefill_tokens + budget.decode_tokens)
        waiting = counters.waiting > 0
        self._idle_steps = self._idle_steps + 1 if waiting and scheduled == 0 else 0
        full = counters.kv_cache_usage >= self.thresholds.kv_full
        produced = snapshot.total_generated > self._generated
        self._full_steps = self._full_steps + 1 if full and not produced else 0
        dirty = False
        if self._idle_steps >= limit:
            text = (
                f"stall: {counters.waiting} waiting, nothing scheduled for {self._idle_steps} steps"
            )
            dirty |= self._raise(Alert(STALL, snapshot.step, snapshot.clock, text))
        elif self._idle_steps == 0:
            dirty |= self._clear(STALL)
        if self._full_steps >= limit:
            text = (
                f"KV cache {counters.kv_cache_usage:.0%} full, no token generated for "
                f"{self._full_steps} steps"
            )
            dirty |= self._raise(Alert(KV_FULL, snapshot.step, snapshot.clock, text))
        elif self._full_steps == 0:
            dirty |= self._clear(KV_FULL)
        if self.thresholds.stuck_after is not None:
            dirty |= self._watch_stuck(snapshot, self.thresholds.stuck_after)
        return dirty

    def _watch_stuck(self, snapshot: StepSnapshot, limit: float) -> bool:
        """One alert for the request that has waited longest, while it waits past ``limit``:
        what a server's ``/health`` does not show (a request left in the queue for ever)."""
        oldest = oldest_waiting(snapshot.active)
        waited = 0.0 if oldest is None else snapshot.clock - oldest.timings.arrival
        stuck = oldest.request_id if oldest is not None and waited > limit else None
        if stuck == self._stuck:
            return False
        dirty = self._stuck is not None and self._clear(STUCK, self._stuck)
        self._stuck = stuck
        if oldest is None or stuck is None:
            return dirty
        reason = snapshot.reason_of(oldest)
        why = f" ({reason.text})" if reason is not None else ""
        text = f"{stuck} stuck: waiting for {waited:.0f} s{why}"
        return self._raise(Alert(STUCK, snapshot.step, snapshot.clock, text, stuck)) or dirty
