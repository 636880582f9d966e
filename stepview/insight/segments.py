"""What a request's timeline is made of: segments, preemptions, and the queues' reasons.

:class:`Segment` is one stretch of a request's life in one phase for one reason,
:class:`Preemption` one eviction. :class:`QueueRuns` keeps each waiting queue's shared reason as
runs of steps: a request that waits for the reason its queue shares
(:func:`~stepview.model.snapshot.reason_of`) is told nothing per step, so its timeline
(:mod:`stepview.insight.timeline`) keeps one open *queue* segment for it and splits it here, by
the runs of its queue's reason, when it closes or its records are asked for. One entry per
change of a queue's reason, not per request or step.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace
from typing import Any, Final, NamedTuple

from stepview.model.scheduling import WaitReason
from stepview.model.snapshot import RequestState

WAITING: Final = "waiting"
PREFILL: Final = "prefill"
DECODE: Final = "decode"
PREEMPTED: Final = "preempted"

_PHASE_OF_STATE: Final = {
    RequestState.PENDING: WAITING,
    RequestState.WAITING: WAITING,
    RequestState.PREEMPTED: PREEMPTED,
    RequestState.PREFILLING: PREFILL,
    RequestState.DECODING: DECODE,
}
# What a segment's ``tokens`` counts, by phase, under the name the records use.
_TOKENS_NAME: Final = {
    PREFILL: "tokens_prefilled",
    DECODE: "tokens_generated",
    PREEMPTED: "tokens_lost",
}


@dataclass(slots=True)
class Segment:
    """One stretch of a request's life in one phase, for one reason. Mutable while open."""

    state: str
    first_step: int
    last_step: int
    start: float
    end: float
    reason: str | None = None
    tokens: int = 0  # prefill: prompt tokens computed; decode: tokens generated; preempted: lost
    queue: int | None = None  # waits for its queue's reason (split by the queue's runs)
    # The reason's sentence and the request it waited behind, as first told in the stretch
    # (for the spans of --otlp-traces-endpoint; the records keep the code alone).
    text: str | None = None
    blocker: str | None = None
    # A prefill's chunks, one per step that computed prompt tokens: (step, start, end, tokens).
    chunks: list[tuple[int, float, float, int]] | None = None

    def chunk(self, step: int, start: float, end: float, tokens: int) -> None:
        """A prefill step (``start``-``end``) that brought its tokens to ``tokens``."""
        chunk = (step, start, end, tokens - self.tokens)
        if self.chunks is None:
            self.chunks = [chunk]
        else:
            self.chunks.append(chunk)

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "state": self.state,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "start": round(self.start, 6),
            "end": round(self.end, 6),
            "reason": self.reason,
        }
        name = _TOKENS_NAME.get(self.state)
        if name is not None:
            out[name] = self.tokens
        return out


class Preemption(NamedTuple):
    """vLLM took the request's KV cache away at ``step``; it must compute those tokens again."""

    step: int
    clock: float
    computed_tokens_lost: int
    kv_usage_before: float  # the KV cache usage after the step before (0..1)
    kv_usage_after: float  # ... and after this step, with the request's blocks freed

    def record(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "computed_tokens_lost": self.computed_tokens_lost,
            "kv_usage_before": round(self.kv_usage_before, 4),
            "kv_usage_after": round(self.kv_usage_after, 4),
        }


class _Run(NamedTuple):
    """From ``first_step`` (which began at ``start``) on, a queue waited for ``code``;
    ``before`` is the step of the snapshot before (the previous run's last step)."""

    first_step: int
    start: float
    code: str | None
    before: int
    reason: WaitReason | None = None


class QueueRuns:
    """Each queue's reason as runs of steps: one entry per change, kept while a segment
    that waits for it is open (older ones are dropped: :meth:`prune`)."""

    def __init__(self) -> None:
        self._runs: list[list[_Run]] = []
        self.step = 0  # the latest snapshot's
        self.clock = 0.0

    def observe(
        self, reasons: tuple[WaitReason | None, ...], step: int, start: float, before: int
    ) -> None:
        """The queues' reasons in the snapshot of ``step`` (whose work began at ``start``)."""
        runs = self._runs
        while len(runs) < len(reasons):
            runs.append([])
        for queue, reason in enumerate(reasons):
            code = None if reason is None else reason.code
            mine = runs[queue]
            if not mine or mine[-1].code != code:
                mine.append(_Run(step, start, code, before, reason))

    def split(self, segment: Segment, last_step: int, end: float) -> list[Segment]:
        """``segment`` (a queue segment, open until ``last_step``/``end``) as one segment per
        run of its queue's reason."""
        queue = segment.queue
        runs = self._runs[queue] if queue is not None and queue < len(self._runs) else []
        at = bisect_right(runs, segment.first_step, key=_run_step) - 1  # the run it began in
        why = runs[at].reason if at >= 0 else None
        first = replace(
            segment,
            last_step=last_step,
            end=end,
            reason=runs[at].code if at >= 0 else None,
            queue=None,
            text=None if why is None else why.text,
            blocker=None if why is None else why.blocker,
        )
        pieces = [first]
        for run in runs[at + 1 :]:
            if run.first_step > last_step:
                break
            previous = pieces[-1]
            previous.last_step = max(previous.first_step, run.before)
            previous.end = max(previous.start, run.start)
            start = max(previous.end, run.start)
            why = run.reason
            pieces.append(
                replace(first, first_step=run.first_step, last_step=last_step, start=start,
                        end=end, reason=run.code, tokens=0,
                        text=None if why is None else why.text,
                        blocker=None if why is None else why.blocker)
            )  # fmt: skip
        return pieces

    def prune(self, oldest: int) -> None:
        """Forget the runs that end before step ``oldest`` (no open segment reaches back)."""
        for queue, runs in enumerate(self._runs):
            keep = max(0, bisect_right(runs, oldest, key=_run_step) - 1)
            if keep:
                self._runs[queue] = runs[keep:]


def _run_step(run: _Run) -> int:
    return run.first_step


def follow_timings(
    parts: list[Segment], scheduled: float | None, first_token: float | None
) -> None:
    """Put the end of the request's first wait at its ``scheduled`` time and the start of
    its first decode at its ``first_token`` time (its :class:`~stepview.model.snapshot.Timings`),
    each within the two segments that meet there.

    One source for both: the detail view shows the timings beside the timeline, and the
    timings are vLLM's own where the engine tells them (the core's first ``SCHEDULED`` event
    and the time of the outputs that carried the first token), the instants that vLLM's
    ``queued_time``, ``prefill_time`` and ``decode_time`` are split by, which step clocks only
    bracket (a step is seen once it is over, and, watched, read a little later still). An
    engine that does not tell vLLM's times has its timings stamped at step ends: the
    timeline follows those too (the detail view never shows two stories), as long as both
    segments keep a length (a timing outside them is left to the step clocks).
    """
    if scheduled is not None:
        for i, segment in enumerate(parts):
            if segment.state != WAITING:
                if i:
                    _meet(parts[i - 1], segment, scheduled)
                break
    if first_token is not None:
        for i in range(1, len(parts)):
            if parts[i].state == DECODE:
                if parts[i - 1].state == PREFILL:
                    _meet(parts[i - 1], parts[i], first_token)
                break


def _meet(before: Segment, after: Segment, at: float) -> None:
    if before.start < at < after.end:
        before.end = after.start = at
