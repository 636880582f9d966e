"""Each request's life as segments (waiting, prefill, decode, preempted) and its preemptions.

Built incrementally from the snapshots as they pass, on the driver thread (live) or over a
trace (replay): :meth:`TimelineTracker.observe` looks only at requests whose view object
changed since the last snapshot (an identity test, see :mod:`stepview.model.snapshot`, over
the chunks of views the step touched, :mod:`stepview.model.active`), so a step costs what it
changed, not what the run holds.

A segment is one stretch of steps in one phase with one wait reason; a new segment starts
whenever the phase or the reason changes. The phase of a step is what the request did in it:
a step that computed prompt tokens is ``prefill`` even when the request came out of it
decoding (a short prompt is prefilled and yields its first token in one step, and vLLM's
scheduler then already calls it running-with-all-computed). Times are the driver's clock: a
segment of engine work starts when its first step began (the snapshot's clock less the
step's time) and ends when its last step ended, so consecutive segments tile the request's
life from arrival to finish without gaps.

A request that waits for the reason its whole queue shares (see
:func:`~stepview.model.snapshot.reason_of`) has no reason of its own and its view does not
change from step to step; its reason changes when the queue's does. So the tracker keeps each
queue's reason as runs of steps (:class:`~stepview.insight.segments.QueueRuns`, one entry when
the queue's reason changes), and such a request's open segment is one *queue* segment, split
into one segment per run when it closes (or when its records are asked for): the same segments
as if every waiting request had been told its reason every step, at no cost per step.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from stepview.insight.segments import (
    _PHASE_OF_STATE,
    DECODE,
    PREEMPTED,
    PREFILL,
    WAITING,
    Preemption,
    QueueRuns,
    Segment,
    follow_timings,
)
from stepview.model.active import changed_between
from stepview.model.recent import since, total_of
from stepview.model.snapshot import RequestState, RequestView, StepSnapshot


@dataclass(slots=True)
class RequestTimeline:
    """What the tracker knows of one request: its segments, preemptions and latest view."""

    request_id: str
    parts: list[Segment] = field(default_factory=list)  # the last one may be a queue segment
    preemptions: list[Preemption] = field(default_factory=list)
    view: RequestView | None = None
    restarts: int = 0  # times its prefill progress fell (each preemption, or a lost prefill)
    done: bool = False
    counted: bool = False  # its latency was added to the run's figures
    # The counters the open segment's ``tokens`` are measured from.
    base_computed: int = 0
    base_output: int = 0
    last_output: int = 0  # output tokens in the latest view

    runs: QueueRuns | None = None  # the tracker's, for an open queue segment
    last_seen: int = 0  # the step of the latest snapshot that showed it (its open segment's)

    @property
    def tokens_lost(self) -> int:
        return sum(p.computed_tokens_lost for p in self.preemptions)

    @property
    def segments(self) -> list[Segment]:
        """Every segment so far, an open queue segment split by its queue's runs up to the
        latest step (see the module docstring)."""
        parts = self.parts
        if not parts or parts[-1].queue is None or self.runs is None:
            return parts
        pieces = self.runs.split(parts[-1], self.runs.step, self.runs.clock)
        before = parts[-2] if len(parts) > 1 else None
        if (
            before is not None
            and before.state == parts[-1].state
            and before.reason == pieces[0].reason
        ):  # one stretch (see TimelineTracker._split_last)
            head = pieces.pop(0)
            joined = replace(before, last_step=head.last_step, end=head.end)
            return [*parts[:-2], joined, *pieces]
        return [*parts[:-1], *pieces]

    def records(self, step: int, clock: float) -> dict[str, Any]:
        """``timeline`` and ``preemptions`` for a request record; an open last segment is
        shown as lasting until ``step``/``clock`` (the latest snapshot)."""
        segments = [s.record() for s in self.segments]
        if segments and not self.done:
            last = segments[-1]
            last["last_step"] = max(last["last_step"], step)
            last["end"] = round(max(last["end"], clock), 6)
        return {"timeline": segments, "preemptions": [p.record() for p in self.preemptions]}


# How often the queue runs no open segment needs are dropped (a scan of the requests held).
_PRUNE_EVERY: Final = 1024
_QUEUED: Final = frozenset({RequestState.WAITING, RequestState.PREEMPTED})


def computed_tokens(view: RequestView) -> int:
    """Tokens whose KV the engine holds for the request: its computed prompt, and while it
    decodes every output token but the last one sampled (not fed back through the model yet)."""
    if view.state is RequestState.DECODING:
        return view.computed_prompt_tokens + max(0, view.output_tokens - 1)
    return view.computed_prompt_tokens


class TimelineTracker:
    """Keeps every request's :class:`RequestTimeline` up to date as snapshots pass.

    ``only`` restricts it to one request (:func:`timeline_of`). Not thread-safe: one thread
    feeds it (the driver's, or a replay's); readers take the records it builds.
    """

    def __init__(self, only: str | None = None, keep_done: int | None = None) -> None:
        """``keep_done``: the timelines of finished requests kept, the latest (``None``:
        all; a run's records of them are written as they finish)."""
        self._only = only
        self._timelines: dict[str, RequestTimeline] = {}
        self._keep_done = keep_done
        self._done: deque[str] = deque()  # finished requests' ids, oldest first
        self._finished_seen = 0
        self.step = 0
        self.clock = 0.0
        self._kv = 0.0
        # Set per snapshot by _begin.
        self._work_start = 0.0
        self._kv_now = 0.0
        self._new_step = False
        self._work_step = 0
        self._clock_now = 0.0
        self._queues = 0  # queues with a shared reason in the latest snapshot
        self._runs = QueueRuns()
        self._pruned_at = 0
        self._active_before: Sequence[RequestView] = ()
        # Running totals of what the preemptions below cost, for readers that must not walk
        # the timelines (the run summary, the Prometheus exporter's counters): the timelines
        # of finished requests do not all stay (``keep_done``).
        self.preemptions = 0
        self.preempted_requests = 0
        self.tokens_lost = 0

    def get(self, request_id: str) -> RequestTimeline | None:
        return self._timelines.get(request_id)

    def __iter__(self) -> Iterator[RequestTimeline]:
        return iter(self._timelines.values())

    def records(self, request_id: str) -> dict[str, Any]:
        """The request's ``timeline`` and ``preemptions`` (empty lists if never seen)."""
        timeline = self._timelines.get(request_id)
        if timeline is None:
            return {"timeline": [], "preemptions": []}
        return timeline.records(self.step, self.clock)

    def observe(self, snapshot: StepSnapshot) -> list[RequestTimeline]:
        """Fold one snapshot in; returns the timelines of the requests that changed in it."""
        self._begin(snapshot)
        changed: list[RequestTimeline] = []
        timelines = self._timelines
        only = self._only
        # Only the views that may have changed since the last snapshot (model.active): a
        # request that only waits is not looked at.
        _, maybe_changed = changed_between(self._active_before, snapshot.active)
        self._active_before = snapshot.active
        for view in maybe_changed:
            timeline = timelines.get(view.request_id)
            if timeline is not None and timeline.view is view:
                continue
            if only is not None and view.request_id != only:
                continue
            changed.append(self._see(view, timeline))
        finished = snapshot.finished
        total = total_of(finished)
        if total > self._finished_seen:
            changed.extend(self._see_finished(since(finished, self._finished_seen)))
            self._finished_seen = total
        self.step, self.clock, self._kv = snapshot.step, snapshot.clock, self._kv_now
        runs = self._runs
        runs.step, runs.clock = snapshot.step, snapshot.clock
        if snapshot.step - self._pruned_at >= _PRUNE_EVERY:
            self._prune()
        return changed

    def _prune(self) -> None:
        """Drop the queue runs no open queue segment reaches back to (O(requests held), once
        every :data:`_PRUNE_EVERY` steps)."""
        self._pruned_at = self.step
        oldest = self.step
        for timeline in self._timelines.values():
            parts = timeline.parts
            if not timeline.done and parts and parts[-1].queue is not None:
                oldest = min(oldest, parts[-1].first_step)
        self._runs.prune(oldest)

    def _see_finished(self, views: Iterable[RequestView]) -> Iterator[RequestTimeline]:
        only = self._only
        for view in views:
            if only is None or view.request_id == only:
                yield self._see(view, self._timelines.get(view.request_id))

    def _begin(self, snapshot: StepSnapshot) -> None:
        new_step = snapshot.step != self.step
        self._new_step = new_step
        # Work seen in a snapshot after a step happened during that step: from when it began.
        # A snapshot between steps (a command) shows what the next step will start from.
        if new_step:
            self._work_start = max(self.clock, snapshot.clock - snapshot.step_time)
        else:
            self._work_start = snapshot.clock
        self._work_step = snapshot.step
        self._kv_now = snapshot.counters.kv_cache_usage
        self._clock_now = snapshot.clock
        reasons = snapshot.queue_reasons
        self._queues = len(reasons)
        if reasons:
            self._runs.observe(reasons, snapshot.step, self._work_start, self.step)

    def _see(self, view: RequestView, timeline: RequestTimeline | None) -> RequestTimeline:
        """Fold in a changed view; where its timings or its segments changed, the segments
        follow the timings (:func:`~stepview.insight.segments.follow_timings`)."""
        previous = None if timeline is None else timeline.view
        opened = 0 if timeline is None else len(timeline.parts)
        timeline = self._fold(view, timeline)
        parts = timeline.parts
        if len(parts) != opened or previous is None or previous.timings is not view.timings:
            follow_timings(parts, view.timings.scheduled, view.timings.first_token)
        return timeline

    def _fold(self, view: RequestView, timeline: RequestTimeline | None) -> RequestTimeline:
        if timeline is None:
            timeline = RequestTimeline(view.request_id, runs=self._runs)
            self._timelines[view.request_id] = timeline
        elif timeline.view is not None and timeline.view.timings.arrival != view.timings.arrival:
            # Another request under an id in use (a rejected duplicate): not this one's story.
            return RequestTimeline(view.request_id, view=view, done=True)
        previous = timeline.view
        timeline.view = view
        if timeline.done:
            return timeline
        before_computed = 0 if previous is None else previous.computed_prompt_tokens
        lost = 0
        preempted = previous is not None and view.num_preemptions > previous.num_preemptions
        if preempted:
            assert previous is not None
            lost = computed_tokens(previous)
            timeline.restarts += 1
            before_computed = 0  # its KV is gone: whatever it has now was computed again
            self.preemptions += view.num_preemptions - previous.num_preemptions
            self.preempted_requests += not timeline.preemptions
            self.tokens_lost += lost
            for extra in range(view.num_preemptions - previous.num_preemptions):
                timeline.preemptions.append(
                    Preemption(
                        self._work_step,
                        self._work_start,
                        lost if extra == 0 else 0,
                        self._kv,
                        self._kv_now,
                    )
                )
        elif view.computed_prompt_tokens < before_computed:
            timeline.restarts += 1  # prefill progress lost without a preemption counted
            before_computed = view.computed_prompt_tokens
        phase = self._phase(view, previous, before_computed)
        if preempted and phase != PREEMPTED:
            # Preempted and scheduled again within one step: the eviction still shows.
            self._open(timeline, view, PREEMPTED, before_computed).tokens = lost
        if view.state.done:
            self._finish(timeline, view, phase)
            self._let_go(view.request_id)
            return timeline
        if phase is None:
            return timeline
        own = view.wait_reason
        queue: int | None = None
        if own is None and view.state in _QUEUED and view.queue < self._queues:
            queue = view.queue  # it waits for its queue's reason: split by the queue's runs
        reason = None if own is None else own.code
        segments = timeline.parts
        current = segments[-1] if segments else None
        if (
            current is None
            or current.state != phase
            or current.reason != reason
            or current.queue != queue
        ):
            current, goes_on = self._continue_or_open(
                timeline, view, phase, before_computed, reason, queue
            )
            if not goes_on:
                current.reason, current.queue = reason, queue
                if own is not None:
                    current.text, current.blocker = own.text, own.blocker
                if phase == PREEMPTED:
                    current.tokens = lost
        self._count(current, timeline, view)
        return timeline

    def _continue_or_open(
        self,
        timeline: RequestTimeline,
        view: RequestView,
        phase: str,
        before_computed: int,
        reason: str | None,
        queue: int | None,
    ) -> tuple[Segment, bool]:
        """:meth:`_open`, unless the segment that closes is a queue segment whose last run had
        the reason the request now has of its own: a request told its reason every step would
        have seen no change, so its stretch goes on (that last run's segment, and True)."""
        parts = timeline.parts
        last = parts[-1] if parts else None
        if last is not None and last.queue is not None and last.state == phase and queue is None:
            last.end = max(last.start, self._work_start)
            last.last_step = max(last.first_step, self.step)
            self._split_last(timeline)
            if parts[-1].reason == reason:
                return parts[-1], True
        return self._open(timeline, view, phase, before_computed), False

    def _open(
        self, timeline: RequestTimeline, view: RequestView, phase: str, before_computed: int
    ) -> Segment:
        """Close the open segment (if any) where this snapshot's work began; open ``phase``."""
        segments = timeline.parts
        start = self._work_start
        step = self._work_step
        if segments:
            current = segments[-1]
            current.end = max(current.start, start)
            current.last_step = max(current.first_step, self.step)
            self._split_last(timeline)
        else:
            arrival = view.timings.arrival
            if phase == WAITING:
                start = min(start, arrival)
            else:
                # Admitted and scheduled between two snapshots: it still waited until then.
                # The step's start is its snapshot's clock less its step time, which for a
                # watched server reaches back to the record before: one that arrived in
                # between starts no earlier than it arrived, and keeps its wait (an instant,
                # by the step clocks) for its scheduled time to end (follow_timings).
                start = max(start, arrival)
                scheduled = view.timings.scheduled
                if arrival < start or (scheduled is not None and arrival < scheduled):
                    segments.append(Segment(WAITING, step, step, arrival, start))
        segment = Segment(phase, step, step, start, start)
        segments.append(segment)
        timeline.base_computed = before_computed
        timeline.base_output = timeline.last_output
        return segment

    def _phase(
        self, view: RequestView, previous: RequestView | None, before_computed: int
    ) -> str | None:
        """What the request did in this snapshot's step; None for a final state that did
        nothing more (an abort between steps)."""
        if self._new_step and view.computed_prompt_tokens > before_computed:
            return PREFILL
        phase = _PHASE_OF_STATE.get(view.state)
        if phase is not None:
            return phase
        if previous is not None and view.output_tokens > previous.output_tokens:
            return DECODE
        return None

    def _count(self, segment: Segment, timeline: RequestTimeline, view: RequestView) -> None:
        output = view.output_tokens
        if segment.state == PREFILL:
            tokens = view.computed_prompt_tokens - timeline.base_computed
            if tokens > segment.tokens and self._new_step:  # a chunk per step (the spans')
                segment.chunk(self._work_step, self._work_start, self._clock_now, tokens)
            segment.tokens = tokens
        elif segment.state == DECODE:
            segment.tokens = output - timeline.base_output
        segment.last_step = max(segment.last_step, self._work_step)
        segment.end = max(segment.end, self._clock_now)
        timeline.last_output = output

    def _finish(self, timeline: RequestTimeline, view: RequestView, phase: str | None) -> None:
        """Close the last segment at the request's end (adding one for its last step's work)."""
        segments = timeline.parts
        current = segments[-1] if segments else None
        if phase is not None:
            if current is None or current.state != phase:
                current = self._open(timeline, view, phase, timeline.base_computed)
            before = timeline.last_output
            self._count(current, timeline, view)
            if phase == PREFILL and view.output_tokens - before > 1:
                # Its prefill and its decode in one step as seen: a watch far behind reads
                # many steps as one. Every token after the prefill's first was decoded.
                timeline.last_output = before + 1
                current = self._open(timeline, view, DECODE, view.computed_prompt_tokens)
                self._count(current, timeline, view)
        if current is not None:
            end = view.timings.finished
            current.end = max(current.start, self.clock if end is None else end)
            self._split_last(timeline)
        timeline.done = True

    def _let_go(self, request_id: str) -> None:
        """A request finished: past ``keep_done`` finished ones, the oldest timeline goes."""
        keep = self._keep_done
        if keep is None:
            return
        done = self._done
        done.append(request_id)
        while len(done) > keep:
            gone = done.popleft()
            timeline = self._timelines.get(gone)
            if timeline is not None and timeline.done:
                del self._timelines[gone]

    def _split_last(self, timeline: RequestTimeline) -> None:
        """A queue segment that closes becomes its queue's runs (module docstring), the first
        of them one with the segment before when that had the same reason of its own (no
        change, had the request been told its queue's reason every step)."""
        parts = timeline.parts
        last = parts[-1]
        if last.queue is None:
            return
        pieces = self._runs.split(last, last.last_step, last.end)
        before = parts[-2] if len(parts) > 1 else None
        if before is not None and before.state == last.state and before.reason == pieces[0].reason:
            head = pieces.pop(0)
            before.last_step, before.end = head.last_step, head.end
            parts[-1:] = pieces
        else:
            parts[-1:] = pieces


def timeline_of(history: Iterable[StepSnapshot], request_id: str) -> RequestTimeline | None:
    """One request's timeline built from a history of snapshots (the UI's detail view).

    Pure: a fresh tracker that follows only ``request_id``, so it costs a pass of identity
    tests over the history's active requests.
    """
    tracker = TimelineTracker(only=request_id)
    for snapshot in history:
        tracker.observe(snapshot)
    return tracker.get(request_id)
