"""Writing a trace: each published snapshot turned into the lines that record what changed.

Snapshots share every :class:`RequestView` that did not change (see ``model/snapshot.py``), so
"what changed at this step" is an identity test over the active requests plus the tail of the
append-only ``finished`` list (:func:`diff_snapshots`): it costs what the step changed, never
what the run accumulated. Each changed request is then written as a delta against its previous
view (:func:`request_delta`), in the line format of :mod:`stepview.trace.format`. The
snapshot's other fields go through the one table of :mod:`stepview.trace.step_fields`, each
written only when it changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from stepview.model.active import ActiveViews, changed_between
from stepview.model.grow import Frozen
from stepview.model.recent import since, total_of
from stepview.model.snapshot import (
    Completion,
    EngineInfo,
    RecentStep,
    RequestState,
    RequestView,
    StepSnapshot,
)
from stepview.trace.format import (
    BLANK_REQUEST,
    lineage_out,
    positions_out,
    scheduling_out,
    stat_out,
)
from stepview.trace.step_fields import start_snapshot, write_step_fields

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SnapshotDiff:
    """How ``current`` differs from ``previous``, by object identity of the request views."""

    added: tuple[RequestView, ...]  # active now, not active before (arrival order)
    changed: tuple[tuple[RequestView, RequestView], ...]  # (before, now): same id, new object
    removed: tuple[RequestView, ...]  # active before, not now (their last active view)
    finished: tuple[RequestView, ...]  # appended to ``finished`` since ``previous``

    @property
    def changed_ids(self) -> frozenset[str]:
        """Every request id the step touched (added, changed, removed or finished)."""
        ids = {v.request_id for v in self.added}
        ids.update(now.request_id for _, now in self.changed)
        ids.update(v.request_id for v in self.removed)
        ids.update(v.request_id for v in self.finished)
        return frozenset(ids)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed or self.finished)


def diff_snapshots(previous: StepSnapshot | None, current: StepSnapshot) -> SnapshotDiff:
    """The requests ``current`` added, changed, removed and finished relative to ``previous``.

    ``previous`` of ``None`` means "nothing before": every active request is added and every
    finished one is new. ``finished`` only grows in a source's snapshots (the oldest may no
    longer be kept, model.recent), so the new ones are those past the previous total. Only the
    active views that may differ are looked at (:func:`~stepview.model.active.changed_between`:
    the chunks a step touched, for two snapshots of one driver), so a request that only waits
    costs nothing here.
    """
    if previous is None:
        return SnapshotDiff(tuple(current.active), (), (), tuple(current.finished))
    old_views, new_views = changed_between(previous.active, current.active)
    before = {v.request_id: v for v in old_views}
    added: list[RequestView] = []
    changed: list[tuple[RequestView, RequestView]] = []
    for view in new_views:
        old = before.pop(view.request_id, None)
        if old is None:
            added.append(view)
        elif old is not view:
            changed.append((old, view))
    new_finished = since(current.finished, total_of(previous.finished))
    return SnapshotDiff(tuple(added), tuple(changed), tuple(before.values()), tuple(new_finished))


def _tail(old: Sequence[T], new: Sequence[T]) -> list[T] | None:
    """What ``new`` appended to ``old``, or None when ``new`` does not start with all of ``old``.

    Frozen views of one append-only list (how the driver and the trace reader grow token and
    logprob lists) always extend each other, which is checked in O(1); anything else is
    compared. Only the appended items are touched, so a step costs O(new tokens), not O(length).
    """
    old_len = len(old)
    new_len = len(new)
    if new_len < old_len:
        return None
    shared = isinstance(old, Frozen) and isinstance(new, Frozen) and new.extends(old)
    if old_len and not shared and list(new[:old_len]) != list(old):
        return None
    return [new[i] for i in range(old_len, new_len)]


def _completion_delta(old: Completion | None, new: Completion) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if old is None:
        old = Completion(new.index)
        delta["i"] = new.index
    elif old.index != new.index:
        delta["i"] = new.index
    if new.token_ids is not old.token_ids:
        tokens = _tail(old.token_ids, new.token_ids)
        if tokens is None:
            delta["t"] = list(new.token_ids)
        elif tokens:
            delta["t+"] = tokens
    if new.pieces is not old.pieces:
        if new.pieces.extends(old.pieces):  # O(appended), the usual case for the driver's views
            added = "".join(new.pieces[len(old.pieces) :])
            if added:
                delta["x+"] = added
        else:
            old_text, new_text = old.text, new.text
            if new_text.startswith(old_text):
                if new_text != old_text:
                    delta["x+"] = new_text[len(old_text) :]
            else:
                delta["x"] = new_text
    if new.logprobs is not old.logprobs:
        if new.logprobs is None:
            delta["l"] = None
        else:
            positions = None if old.logprobs is None else _tail(old.logprobs, new.logprobs)
            if positions is None:
                delta["l"] = positions_out(new.logprobs)
            elif positions:
                delta["l+"] = positions_out(positions)
    if new.cumulative_logprob != old.cumulative_logprob:
        delta["cl"] = new.cumulative_logprob
    if new.finish_reason != old.finish_reason:
        delta["f"] = new.finish_reason
    if new.stop_reason != old.stop_reason:
        delta["sr"] = new.stop_reason
    return delta


def request_delta(old: RequestView | None, new: RequestView) -> dict[str, Any]:
    """What turns ``old`` (or an empty request) into ``new``; see the module docstring."""
    base = old if old is not None else BLANK_REQUEST
    delta: dict[str, Any] = {"id": new.request_id}
    if new.prompt != base.prompt:
        delta["p"] = new.prompt
    if new.spec is not base.spec and new.spec != base.spec:
        old_params = base.spec.to_dict()
        delta["sp"] = {k: v for k, v in new.spec.to_dict().items() if v != old_params[k]}
    if new.state is not base.state:
        delta["s"] = new.state.value
    t = new.timings
    if t is not base.timings and t != base.timings:
        delta["tm"] = [t.arrival, t.scheduled, t.first_token, t.finished]
    if new.prompt_tokens != base.prompt_tokens:
        delta["pt"] = new.prompt_tokens
    if new.computed_prompt_tokens != base.computed_prompt_tokens:
        delta["cp"] = new.computed_prompt_tokens
    if new.num_preemptions != base.num_preemptions:
        delta["np"] = new.num_preemptions
    if new.prompt_token_ids is not base.prompt_token_ids and (
        new.prompt_token_ids != base.prompt_token_ids
    ):
        delta["pi"] = list(new.prompt_token_ids)
    if new.prompt_logprobs is not base.prompt_logprobs and (
        new.prompt_logprobs != base.prompt_logprobs
    ):
        delta["pl"] = None if new.prompt_logprobs is None else positions_out(new.prompt_logprobs)
    if new.error != base.error:
        delta["e"] = new.error
    if new.lineage != base.lineage:
        delta["ln"] = lineage_out(new.lineage)
    if new.messages is not base.messages and new.messages != base.messages:
        delta["m"] = [list(message) for message in new.messages]
    if new.trace_context != base.trace_context:
        delta["tc"] = new.trace_context
    if new.client_id != base.client_id:
        delta["ci"] = new.client_id
    scheduling_out(new, base, delta)
    if new.completions is not base.completions:
        old_completions = base.completions
        delta["c"] = [
            None
            if i < len(old_completions) and old_completions[i] is c
            else _completion_delta(old_completions[i] if i < len(old_completions) else None, c)
            for i, c in enumerate(new.completions)
        ]
    return delta


class TraceEncoder:
    """Turns each published snapshot into the trace lines that record what changed.

    Pure and stateful: it remembers the previous snapshot, and must see every snapshot of a
    run, in order, after a header written with ``info``; or, given ``after``, every snapshot
    after that one, continuing lines another encoder wrote up to it.
    """

    def __init__(self, info: EngineInfo, after: StepSnapshot | None = None) -> None:
        self._prev = start_snapshot(info) if after is None else after
        self._recent_cap: int | None = None

    def encode(self, snapshot: StepSnapshot) -> list[dict[str, Any]]:
        """The event lines (possibly none) and the step line for ``snapshot``, in file order."""
        prev = self._prev
        self._prev = snapshot
        line: dict[str, Any] = {"k": "step"}
        write_step_fields(prev, snapshot, line)
        self._encode_recent(prev.recent, snapshot.recent, line)
        events = self._encode_requests(prev, snapshot, line)
        events.append(line)
        return events

    def _encode_recent(
        self, old: tuple[RecentStep, ...], new: tuple[RecentStep, ...], line: dict[str, Any]
    ) -> None:
        """Append-only with a bounded window, like the driver's deque: write the new tail."""
        if new is old or (not new and not old):
            return
        kept = len(new)
        if old:
            last = old[-1]
            while kept and new[kept - 1] is not last:
                kept -= 1
            consistent = 0 < kept <= len(old) and new[0] is old[len(old) - kept]
        else:
            kept, consistent = 0, True
        if not consistent:
            line["recent"] = [stat_out(s) for s in new]
            line["recent_reset"] = True
            return
        appended = new[kept:]
        if appended:
            line["recent"] = [stat_out(s) for s in appended]
        grown = len(old) + len(appended)
        expected = grown if self._recent_cap is None else min(self._recent_cap, grown)
        if len(new) != expected:
            self._recent_cap = len(new)
            line["recent_cap"] = len(new)

    def _encode_requests(
        self, prev: StepSnapshot, snapshot: StepSnapshot, line: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """Fill the request deltas into ``line``; return the event lines they imply."""
        diff = diff_snapshots(prev, snapshot)
        events: list[dict[str, Any]] = []
        step = snapshot.step
        if diff.added:
            line["new"] = [request_delta(None, view) for view in diff.added]
            events.extend(_add_event(step, view) for view in diff.added)
        if diff.changed:
            line["upd"] = [request_delta(old, new) for old, new in diff.changed]
        removed = {view.request_id: view for view in diff.removed}
        if diff.finished:
            finished = []
            for view in diff.finished:
                base = removed.pop(view.request_id, None)
                entry = request_delta(base, view)
                if base is None:
                    entry["n"] = 1
                    events.append(_add_event(step, view))
                finished.append(entry)
            line["fin"] = finished
            events.extend(
                {
                    "k": "event",
                    "event": "abort" if view.state is RequestState.ABORTED else "reject",
                    "step": step,
                    "clock": view.timings.finished,
                    "id": view.request_id,
                    "error": view.error,
                }
                for view in diff.finished
                if view.state in (RequestState.ABORTED, RequestState.REJECTED)
            )
        if removed:
            line["gone"] = list(removed)
        # The reader keeps the previous order, drops what left and appends what is new. A
        # driver's snapshots only ever change order so (model.active): only others are checked.
        if isinstance(prev.active, ActiveViews) and isinstance(snapshot.active, ActiveViews):
            return events
        left = {view.request_id for view in diff.removed}
        expected = [v.request_id for v in prev.active if v.request_id not in left]
        expected.extend(v.request_id for v in diff.added)
        actual = [v.request_id for v in snapshot.active]
        if actual != expected:
            line["order"] = actual
        return events


def _add_event(step: int, view: RequestView) -> dict[str, Any]:
    return {
        "k": "event",
        "event": "add",
        "step": step,
        "clock": view.timings.arrival,
        "id": view.request_id,
        "prompt": view.prompt,
        "params": view.spec.to_dict(),
    }
