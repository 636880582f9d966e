"""Two recorded runs side by side: their figures, their requests matched, and where they part.

``stepview --replay A --compare B`` asks two questions of two runs of the same load (with
different engine settings, say ``--max-num-seqs 8`` against ``4``): how do the figures differ
(throughput, latency percentiles, preemptions, each request's latency), and at which step did
the scheduler first decide differently? Both are answered from the snapshots alone, so this
module is pure (the command line reads the traces, the TUI shows the same answers).

Requests are matched by id when both runs have it (a replayed load names its requests the
same way each time), else by prompt and sampling parameters, in arrival order: the n-th
request of B with a given prompt and parameters is the n-th of A with them.

A step's *scheduling decision* is the set of ``(request, tokens scheduled, state)`` of its
prefilling and decoding requests (the tokens when the trace has them, version 2 on; without
them the set of requests and their states) plus the requests preempted in that step; a step
one run never reached decided nothing. Requests are named by A's id on both sides, so a
request that B calls differently still decides the same.

Steps are the engines' own counts, which line up when both runs started their engines for
the load. A rerun (``stepview --rerun``) of a recording that opened mid-run (a flight
recording, a watched server's) does not: its engine starts at step 1 where the recording
opened at step 812, say. Compared *aligned*, B's steps are counted from A's first step that
scheduled anything (:attr:`Comparison.b_shift`), and everything is said in A's steps.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stepview.insight.run import RunInsight
from stepview.model.latency import RequestLatency, request_latency
from stepview.model.snapshot import RequestState, RequestView, StepSnapshot

_SCHEDULED = (RequestState.PREFILLING, RequestState.DECODING)


@dataclass(frozen=True, slots=True)
class RunFigures:
    """One run's headline figures, from its last snapshot and a :class:`RunInsight`."""

    steps: int
    requests: int
    output_tokens: int
    busy_s: float  # first request scheduled to last one finished (driver clock)
    summary: dict[str, Any]  # RunInsight.summary(): latency distributions, preemptions

    @property
    def throughput(self) -> float | None:
        """Output tokens per second over the busy span (None when nothing ran)."""
        return self.output_tokens / self.busy_s if self.busy_s > 0 else None


def run_figures(snapshots: Iterable[StepSnapshot]) -> tuple[RunFigures, StepSnapshot | None]:
    """The figures of a run, and its last snapshot (every request in its final view)."""
    insight = RunInsight()
    last: StepSnapshot | None = None
    for snapshot in snapshots:
        insight.observe(snapshot)
        last = snapshot
    views = last.requests() if last is not None else []
    starts = [v.timings.scheduled for v in views if v.timings.scheduled is not None]
    ends = [v.timings.finished for v in views if v.timings.finished is not None]
    busy = max(ends) - min(starts) if starts and ends else 0.0
    figures = RunFigures(
        steps=last.step if last is not None else 0,
        requests=len(views),
        output_tokens=sum(v.output_tokens for v in views),
        busy_s=max(0.0, busy),
        summary=insight.summary(),
    )
    return figures, last


@dataclass(slots=True)
class Matching:
    """Which request of B is which of A: ``b_to_a`` maps B's ids to A's."""

    b_to_a: dict[str, str] = field(default_factory=dict)
    by_id: int = 0
    by_prompt: int = 0
    only_a: int = 0
    only_b: int = 0


def _key(view: RequestView) -> tuple[str, tuple[tuple[str, Any], ...]]:
    return view.prompt, tuple(sorted((k, repr(v)) for k, v in view.spec.to_dict().items()))


def match_requests(a: Sequence[RequestView], b: Sequence[RequestView]) -> Matching:
    """Match B's requests to A's: by id, then by prompt and parameters in arrival order."""
    matching = Matching()
    a_ids = {v.request_id for v in a}
    b_ids = {v.request_id for v in b}
    left_a: defaultdict[tuple[str, Any], deque[str]] = defaultdict(deque)
    for view in sorted(a, key=lambda v: v.timings.arrival):
        if view.request_id not in b_ids:
            left_a[_key(view)].append(view.request_id)
    for view in sorted(b, key=lambda v: v.timings.arrival):
        if view.request_id in a_ids:
            matching.b_to_a[view.request_id] = view.request_id
            matching.by_id += 1
        elif left_a[_key(view)]:
            matching.b_to_a[view.request_id] = left_a[_key(view)].popleft()
            matching.by_prompt += 1
    matching.only_a = len(a) - len(matching.b_to_a)
    matching.only_b = len(b) - len(matching.b_to_a)
    return matching


class RequestDelta(tuple[RequestLatency, RequestLatency]):
    """A matched, finished request's latency in A and in B."""

    __slots__ = ()

    @property
    def e2e_change(self) -> float:
        a, b = self
        return (b.e2e or 0.0) - (a.e2e or 0.0)


def latency_deltas(
    a: Sequence[RequestView], b: Sequence[RequestView], matching: Matching
) -> list[RequestDelta]:
    """The matched requests finished in both runs, biggest end-to-end change first."""
    finished_a = {v.request_id: v for v in a if v.state is RequestState.FINISHED}
    deltas = [
        RequestDelta((request_latency(finished_a[a_id]), request_latency(view)))
        for view in b
        if view.state is RequestState.FINISHED
        and (a_id := matching.b_to_a.get(view.request_id)) in finished_a
    ]
    deltas.sort(key=lambda d: abs(d.e2e_change), reverse=True)
    return deltas


Decision = frozenset[tuple[str, int | None, str]]
"""``(request named as in A, tokens scheduled or None, state)``; state ``preempted`` for a
request preempted in that step."""


def decisions(
    snapshots: Iterable[StepSnapshot], rename: dict[str, str] | None = None, shift: int = 0
) -> dict[int, Decision]:
    """Each step's scheduling decision (module docstring), by step number (plus ``shift``).

    The last snapshot published at a step is the one after it; snapshots between steps (a
    command) repeat the step number and the decision. ``rename`` maps ids to A's.
    """
    names = rename or {}
    with_tokens: bool | None = None
    preempted_so_far: dict[str, int] = {}
    out: dict[int, Decision] = {}
    for snapshot in snapshots:
        active = snapshot.active
        if with_tokens is None and any(v.scheduled_tokens for v in active):
            with_tokens = True
        items: set[tuple[str, int | None, str]] = set()
        for view in active:
            rid = names.get(view.request_id, view.request_id)
            if view.state in _SCHEDULED:
                tokens = view.scheduled_tokens if with_tokens else None
                items.add((rid, tokens, view.state.value))
            if view.num_preemptions > preempted_so_far.get(view.request_id, 0):
                preempted_so_far[view.request_id] = view.num_preemptions
                items.add((rid, None, RequestState.PREEMPTED.value))
        step = snapshot.step + shift
        if step in out and not items:
            continue  # a snapshot between steps keeps the step's decision
        out[step] = frozenset(items)
    return out


def first_scheduling(decided: dict[int, Decision]) -> int | None:
    """The first step that scheduled or preempted anything (``None``: none did)."""
    return min((step for step, decision in decided.items() if decision), default=None)


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where the runs first decided differently (``step`` None: never, over ``steps``)."""

    step: int | None
    steps: int
    a: Decision = frozenset()
    b: Decision = frozenset()


def first_difference(a: dict[int, Decision], b: dict[int, Decision]) -> Divergence:
    """The first step whose decisions differ; a step a run lacks decided nothing."""
    steps = sorted(set(a) | set(b))
    for step in steps:
        da, db = a.get(step, frozenset()), b.get(step, frozenset())
        if da != db:
            return Divergence(step, len(steps), da, db)
    return Divergence(None, len(steps))


@dataclass(frozen=True, slots=True)
class Comparison:
    """Everything ``--compare`` reports."""

    a: RunFigures
    b: RunFigures
    matching: Matching
    deltas: list[RequestDelta]
    divergence: Divergence
    b_names: dict[str, str]  # A's id to B's, to name B's requests as B does
    b_shift: int = 0  # B's step s is A's step s + b_shift (module docstring: aligned)


def compare_runs(
    a: Sequence[StepSnapshot], b: Sequence[StepSnapshot], *, aligned: bool = False
) -> Comparison:
    """Compare two runs' snapshots (each oldest first); ``aligned``: B's steps counted from A's
    first scheduling step (see the module docstring)."""
    figures_a, last_a = run_figures(a)
    figures_b, last_b = run_figures(b)
    views_a = last_a.requests() if last_a is not None else []
    views_b = last_b.requests() if last_b is not None else []
    matching = match_requests(views_a, views_b)
    decided_a = decisions(a)
    decided_b = decisions(b, matching.b_to_a)
    shift = 0
    if aligned:
        first_a, first_b = first_scheduling(decided_a), first_scheduling(decided_b)
        if first_a is not None and first_b is not None and first_a != first_b:
            shift = first_a - first_b
            decided_b = decisions(b, matching.b_to_a, shift)
    return Comparison(
        figures_a,
        figures_b,
        matching,
        latency_deltas(views_a, views_b, matching),
        first_difference(decided_a, decided_b),
        {a_id: b_id for b_id, a_id in matching.b_to_a.items()},
        shift,
    )
