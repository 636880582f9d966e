"""What changed in a snapshot, as events: followed from what the driver already says changed.

:class:`EventDeriver` is fed every snapshot on the driver thread, between two engine steps, so
it costs what the step changed, not what the run holds. It reads no whole snapshot: the
driver's active views share every chunk a step did not touch, and a request that only waits
keeps the very same view object (:mod:`stepview.model.active`), so
:func:`~stepview.model.active.changed_between` hands over the few views that may differ, and an
identity test against the view seen last sorts out the rest. Each changed view is compared with
that last one, field by field, for the transitions a program acts on (arrived, preempted,
resumed, a prefill chunk, the first token, a new wait reason); the requests that finished come
from the driver's own list of them.

One case costs more than the views that changed: most waiting requests wait for the reason
their whole queue shares (:func:`~stepview.model.snapshot.reason_of`), and their views do not
change when that reason does. So the deriver keeps, per queue, the requests that wait for its
reason; when the queue's reason changes (its code or the request it is behind; not merely its
figures), each of them gets a ``waiting`` event. That is one event per request whose reason
changed: the events themselves, not a scan.

No I/O here: the events go to the destinations of :mod:`stepview.events.sink`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from stepview.events import schema
from stepview.events.schema import When
from stepview.insight.timeline import computed_tokens
from stepview.metrics.waiting import WaitingByReason
from stepview.model.active import changed_between
from stepview.model.scheduling import WaitReason
from stepview.model.snapshot import RequestState, RequestView, StepSnapshot, reason_of

Event = dict[str, Any]

_QUEUED = frozenset({RequestState.WAITING, RequestState.PREEMPTED})
_WAITS = frozenset({RequestState.PENDING, *_QUEUED})
_SAID = tuple[str, str | None]  # (code, blocker) of the reason last said for a request


class EventDeriver:
    """Snapshots in, events out; one thread (the driver's, or a replay's).

    ``step_every``: seconds between ``step`` events on stepview's clock (0: one per engine
    step); ``prompts``: put the prompt's text in ``arrived``; ``server``: the address of the
    watched server, named in every event; ``wall``: stepview's wall clock at a snapshot (live:
    now; a replay: the trace's start plus the snapshot's clock).
    """

    def __init__(
        self,
        *,
        step_every: float = 0.25,
        prompts: bool = False,
        server: str | None = None,
        wall: Callable[[StepSnapshot], float],
    ) -> None:
        self._step_every = step_every
        self._prompts = prompts
        self._server = server
        self._wall = wall
        self._seen: dict[str, RequestView] = {}  # active requests, as last looked at
        self._said: dict[str, _SAID] = {}  # the reason last said, while a request waits
        self._on_queue: list[dict[str, None]] = []  # per queue: who waits for its reason
        self._queue_said: list[_SAID | None] = []  # per queue: its reason as last looked at
        self._before: Sequence[RequestView] = ()
        self._waiting = WaitingByReason()
        self._last_step = -1
        self._steps_since = 0
        self._step_at: float | None = None  # stepview's clock of the last step event

    def observe(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> list[Event]:
        """The events of one snapshot; ``finished``: the requests that ended since the last."""
        when = self._when(snapshot)
        out: list[Event] = []
        _, maybe_changed = changed_between(self._before, snapshot.active)
        self._before = snapshot.active
        reasons = snapshot.queue_reasons
        seen = self._seen
        for view in maybe_changed:
            before = seen.get(view.request_id)
            if before is view:
                continue
            seen[view.request_id] = view
            self._changed(when, before, view, reasons, out)
        for view in finished:
            # Off its queue before the queue's news: a watch that reads several steps as one
            # can see a request waiting, then finished where its queue's reason changed.
            self._off_queues(view.request_id)
        self._queues(when, reasons, out)
        for view in finished:
            before = seen.pop(view.request_id, None)
            self._changed(when, before, view, reasons, out)
            self._forget(view)
            done = schema.finished if view.state is RequestState.FINISHED else schema.aborted
            out.append(done(when, view))
        counts = self._waiting.observe(snapshot)
        if snapshot.step != self._last_step and snapshot.step > 0:  # 0: no step yet
            self._steps_since += snapshot.step - max(self._last_step, 0)
            self._last_step = snapshot.step
            if self._step_due(snapshot.clock):
                out.append(self._step_event(when, snapshot, counts))
        return out

    # -- one request -------------------------------------------------------------------------

    def _changed(
        self,
        when: When,
        before: RequestView | None,
        view: RequestView,
        reasons: Sequence[WaitReason | None],
        out: list[Event],
    ) -> None:
        """The events of one request between its last view and ``view``."""
        request_id = view.request_id
        if before is None:
            out.append(schema.arrived(when, view, view.client_id, self._prompts))
            computed_before = 0
            first_before = None
            preemptions_before = 0
            state_before = RequestState.PENDING
        else:
            computed_before = before.computed_prompt_tokens
            first_before = before.timings.first_token
            preemptions_before = before.num_preemptions
            state_before = before.state
        state = view.state
        if view.num_preemptions > preemptions_before:
            lost = 0 if before is None else computed_tokens(before)
            out.append(schema.preempted(when, view, lost))
            computed_before = 0  # its KV is gone: what it has now was computed again
            state_before = RequestState.PREEMPTED
            self._said.pop(request_id, None)  # a new stretch of waiting: its reason is news
        running = state.pane == "running" or state is RequestState.FINISHED
        if running and state_before is RequestState.PREEMPTED:
            out.append(schema.resumed(when, view))
        if view.computed_prompt_tokens > computed_before and (running or state.done):
            out.append(schema.scheduled(when, view, view.computed_prompt_tokens - computed_before))
        if view.timings.first_token is not None and first_before is None:
            out.append(schema.first_token(when, view))
        self._follow_reason(when, view, reasons, out)

    def _follow_reason(
        self,
        when: When,
        view: RequestView,
        reasons: Sequence[WaitReason | None],
        out: list[Event],
    ) -> None:
        """Say the request's reason if it changed; keep it with its queue while it waits for
        the queue's reason (see the module docstring)."""
        request_id = view.request_id
        self._off_queues(request_id)
        if view.state not in _WAITS:
            self._said.pop(request_id, None)
            return
        if view.wait_reason is None and view.state in _QUEUED:
            self._queue(view.queue)[request_id] = None
        reason = reason_of(view, reasons)
        if reason is None:
            return
        key = (reason.code, reason.blocker)
        if self._said.get(request_id) != key:
            self._said[request_id] = key
            out.append(schema.waiting(when, view, reason))

    def _queues(self, when: When, reasons: Sequence[WaitReason | None], out: list[Event]) -> None:
        """Each queue whose shared reason changed: a ``waiting`` event for each request that
        waits for it and had not been told this reason."""
        said = self._queue_said
        for queue, reason in enumerate(reasons):
            key = None if reason is None else (reason.code, reason.blocker)
            while len(said) <= queue:
                said.append(None)
            if said[queue] == key:
                continue
            said[queue] = key
            if reason is None or key is None:
                continue
            members = self._queue(queue)
            for request_id in members:
                if self._said.get(request_id) == key:
                    continue
                self._said[request_id] = key
                view = self._seen.get(request_id)
                if view is not None:
                    out.append(schema.waiting(when, view, reason))

    def _queue(self, queue: int) -> dict[str, None]:
        on_queue = self._on_queue
        while len(on_queue) <= queue:
            on_queue.append({})
        return on_queue[queue]

    def _off_queues(self, request_id: str) -> None:
        for members in self._on_queue:
            members.pop(request_id, None)

    def _forget(self, view: RequestView) -> None:
        self._off_queues(view.request_id)
        self._said.pop(view.request_id, None)

    # -- the engine ----------------------------------------------------------------------------

    def _when(self, snapshot: StepSnapshot) -> When:
        """The time fields of the snapshot's events: the engine's time is the step's date
        (a watched server's steps are dated by its records), moved onto the wall clock."""
        wall = self._wall(snapshot)
        recent = snapshot.recent
        engine_time = None
        if recent and recent[-1].step == snapshot.step:
            engine_time = wall - max(0.0, snapshot.clock - recent[-1].clock)
        return When(snapshot.step, snapshot.clock, wall, engine_time, self._server)

    def _step_due(self, clock: float) -> bool:
        last = self._step_at
        if last is not None and self._step_every and clock - last < self._step_every:
            return False
        self._step_at = clock
        return True

    def _step_event(
        self, when: When, snapshot: StepSnapshot, counts: dict[tuple[int, str], int]
    ) -> Event:
        by_reason: dict[str, int] = {}
        for (_, code), count in counts.items():
            if count:
                by_reason[code] = by_reason.get(code, 0) + count
        steps, self._steps_since = self._steps_since, 0
        counters = snapshot.counters
        return schema.step(
            when,
            running=counters.running,
            waiting_by_reason=by_reason,
            kv_cache_usage=counters.kv_cache_usage,
            budget=snapshot.budget,
            step_time=snapshot.step_time,
            steps=steps,
        )


def events_of(snapshots: Sequence[StepSnapshot], deriver: EventDeriver) -> Iterator[Event]:
    """The events of a whole run's snapshots (a replayed trace), in order: each snapshot's
    ``finished`` holds the whole run's, so those since the last are taken."""
    from stepview.model.recent import since, total_of

    done = 0
    for snapshot in snapshots:
        total = total_of(snapshot.finished)
        finished = since(snapshot.finished, done) if total > done else ()
        done = max(done, total)
        yield from deriver.observe(snapshot, finished)
