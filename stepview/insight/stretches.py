"""A request's timeline as a person reads it: consecutive waiting segments as one stretch.

A timeline (:mod:`stepview.insight.timeline`) starts a new segment whenever the wait reason
changes, which the records need; but a request that waited 100 steps behind a blocked head
sees its reason flip between ``behind`` and ``kv_cache`` from step to step, and 25 segments
say less than one line: ``waiting 0.86 s, steps 17-117: behind 71 steps, kv_cache 11,
token_budget 2``. :func:`stretches` groups the segments so: consecutive ``waiting`` segments
(whatever their reasons) are one :class:`Stretch`, consecutive ``preempted`` ones (one eviction
whose reason changed while it waited) another, and every other segment is a stretch of its
own. A preemption never merges into the waiting around it: it is a distinct event, the one a
user looks for. Only what is drawn for a person groups; the records keep every segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from stepview.insight.segments import PREEMPTED, WAITING, Segment

# The phases whose consecutive segments differ only by the reason: one stretch each.
_MERGED: Final = frozenset({WAITING, PREEMPTED})
NO_REASON: Final = "queued"
"""What a waiting segment without a reason is counted as (nothing said why, yet)."""


@dataclass(frozen=True, slots=True)
class Stretch:
    """Consecutive segments of one phase (at least one), shown as one."""

    segments: tuple[Segment, ...]
    first: int  # the index of its first segment in the timeline's

    @property
    def state(self) -> str:
        return self.segments[0].state

    @property
    def first_step(self) -> int:
        return self.segments[0].first_step

    @property
    def last_step(self) -> int:
        return self.segments[-1].last_step

    @property
    def start(self) -> float:
        return self.segments[0].start

    @property
    def end(self) -> float:
        return self.segments[-1].end

    @property
    def duration(self) -> float:
        return max(0.0, self.end - self.start)

    @property
    def reasons(self) -> list[tuple[str, int]]:
        """Per reason the steps waited for it, most steps first (ties: the first seen first).
        A segment counts its steps from first to last; consecutive segments do not share a
        step, so the counts add up to the stretch's steps."""
        steps: dict[str, int] = {}
        for segment in self.segments:
            reason = segment.reason or NO_REASON
            steps[reason] = steps.get(reason, 0) + segment.last_step - segment.first_step + 1
        return sorted(steps.items(), key=lambda item: -item[1])


def stretches(segments: Sequence[Segment]) -> list[Stretch]:
    """Every segment in exactly one stretch, in order (see the module docstring)."""
    out: list[Stretch] = []
    group: list[Segment] = []
    first = 0
    for index, segment in enumerate(segments):
        if group and not (segment.state == group[0].state and segment.state in _MERGED):
            out.append(Stretch(tuple(group), first))
            group, first = [], index
        group.append(segment)
    if group:
        out.append(Stretch(tuple(group), first))
    return out


def steps_text(first: int, last: int) -> str:
    """``step 17`` or ``steps 17-117``."""
    return f"step {first}" if first == last else f"steps {first}-{last}"


def duration_text(value: float) -> str:
    """``0.86 s``; under 10 ms in milliseconds, so that a short wait does not read 0.00 s."""
    if value < 0.01:
        return f"{value * 1000:.1f} ms"
    return f"{value:.2f} s" if value < 100 else f"{value:.0f} s"


def breakdown(stretch: Stretch, *, compact: bool = False) -> str:
    """``behind 71 steps, kv_cache 11, token_budget 2`` (compact: ``behind 71, kv_cache 11,
    token_budget 2``)."""
    parts = []
    for at, (reason, steps) in enumerate(stretch.reasons):
        unit = "" if compact or at else (" step" if steps == 1 else " steps")
        parts.append(f"{reason} {steps}{unit}")
    return ", ".join(parts)


def label(stretch: Stretch, what: str | None = None) -> str:
    """``waiting 0.86 s, steps 17-117: behind 71 steps, kv_cache 11, token_budget 2``:
    ``what`` it did after the colon (by default, the steps per reason)."""
    steps = steps_text(stretch.first_step, stretch.last_step)
    said = breakdown(stretch) if what is None else what
    return f"{stretch.state} {duration_text(stretch.duration)}, {steps}: {said}"
