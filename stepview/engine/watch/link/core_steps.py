"""What one engine core's records say for a driver step (:class:`CoreStep`), and vLLM's own
times for its requests (:class:`ScheduledTimes`).

vLLM's times: the plug-in's records carry, for each request, when the engine core first
scheduled it and when its first token was made
(:attr:`~stepview.engine.records.facts.RequestFacts.scheduled_at`, ``first_token_at``), on
the record's own clock, the server's wall clock. The watch dates records on its own clock by
the offset it measures between the two (:meth:`WatchedCore.received
<stepview.engine.watch.link.watched_core.WatchedCore.received>`), so these times are moved by the
same offset, and handed to the ledger as :class:`~stepview.model.engine_api.VllmStamps` (how
long before the step that reports them), as stepview's own engine hands it the times its
output processor holds: the ledger then splits queue, prefill and decode where vLLM does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from stepview.model.engine_api import (
    ArrivedRequest,
    EndedRequest,
    OutputUpdate,
    SchedulerEntry,
    VllmStamps,
)


class CoreStep(NamedTuple):
    """What one record says, for the driver's step."""

    scheduled: dict[str, SchedulerEntry]
    outputs: list[OutputUpdate]
    arrived: list[ArrivedRequest]
    ended: list[EndedRequest]
    prompt_tokens: int  # scheduled for prefill in this engine-core step
    generated: int  # output tokens first seen in this record
    preemptions: int
    interval: float | None  # seconds per engine-core step since the previous record
    age: float  # seconds since the step happened (by this machine's clock)
    # vLLM's (scheduled, first token) times of the requests whose first token is in this
    # record, on this machine's wall clock (see ScheduledTimes).
    stamps: dict[str, tuple[float, float]]


class ScheduledTimes:
    """The scheduled times of one engine core's samples until their first token, by core id.

    A record names a request with its scheduled time from its first schedule to its first
    token, and with its first-token time once; only the first such (per sample) is kept.
    """

    __slots__ = ("scheduled",)

    def __init__(self) -> None:
        self.scheduled: dict[str, float] = {}  # core id -> server wall clock

    def seen(
        self,
        core_id: str,
        request_id: str,
        scheduled_at: float,
        first_token_at: float,
        offset: float,
        stamps: dict[str, tuple[float, float]],
    ) -> None:
        """A record's times for one sample of ``request_id``; its first token's go to
        ``stamps`` (the earliest of its samples': vLLM's front end keeps each sample's own,
        and a request's first token is its first sample's)."""
        if scheduled_at:
            self.scheduled.setdefault(core_id, scheduled_at)
        if not first_token_at:
            return
        scheduled = self.scheduled.pop(core_id, 0.0) or scheduled_at or first_token_at
        scheduled, first = scheduled + offset, first_token_at + offset
        had = stamps.get(request_id)
        if had is not None:
            scheduled, first = min(had[0], scheduled), min(had[1], first)
        stamps[request_id] = (min(scheduled, first), first)

    def forget(self, core_id: str) -> None:
        self.scheduled.pop(core_id, None)

    def clear(self) -> None:
        self.scheduled.clear()


def vllm_stamps(stamps: Mapping[str, tuple[float, float]], at: float) -> dict[str, VllmStamps]:
    """``stamps`` (this machine's wall clock) as seconds before ``at``: when the step that
    reports them happened, on the same clock (``now - age``)."""
    return {rid: VllmStamps(at - sched, at - first) for rid, (sched, first) in stamps.items()}


def merged(steps: list[CoreStep]) -> CoreStep:
    """Several records read in one driver step (stepview catching up), as one.

    Outputs, arrivals and ends in order (the ledger adopts first and ends last, so a request
    may do both within one step); the latest entry of each request; the per-step figures
    summed; the mean engine-core step time; the age of the newest record, the one all is
    dated by (an arrival's wait, told from its own record, grows by how much older that is).
    """
    scheduled: dict[str, SchedulerEntry] = {}
    outputs: list[OutputUpdate] = []
    arrived: list[ArrivedRequest] = []
    ended: list[EndedRequest] = []
    stamps: dict[str, tuple[float, float]] = {}
    intervals: list[float] = []
    newest = steps[-1].age
    for step in steps:
        scheduled.update(step.scheduled)
        for request_id, stamp in step.stamps.items():
            stamps.setdefault(request_id, stamp)  # its first token's: the earliest
        outputs.extend(step.outputs)
        older = step.age - newest
        arrived.extend(
            [a._replace(waited=a.waited + older) for a in step.arrived] if older else step.arrived
        )
        ended.extend(step.ended)
        if step.interval is not None:
            intervals.append(step.interval)
    return CoreStep(
        scheduled,
        outputs,
        arrived,
        ended,
        sum(step.prompt_tokens for step in steps),
        sum(step.generated for step in steps),
        sum(step.preemptions for step in steps),
        sum(intervals) / len(intervals) if intervals else None,
        newest,
        stamps,
    )
