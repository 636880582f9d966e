"""The engine core's records turned into what the driver consumes: caller id -> SchedulerEntry.

The scheduler plug-in (:mod:`stepview.engine.plugin.scheduler`) reports every request under
the engine core's own id, with vLLM's scheduler status. The driver wants one
:class:`~stepview.model.engine_api.SchedulerEntry` per request it added, in stepview's states.
How a record's request becomes an entry:

* ``RUNNING`` -> scheduled. ``num_computed_tokens`` already counts the tokens of this step,
  and also counts generated tokens, so prefill progress is
  ``min(num_computed_tokens, num_prompt_tokens)``: PREFILLING while that is below
  ``num_prompt_tokens`` (a chunked prefill in progress, which produces no output), else
  DECODING.
* ``PREEMPTED`` -> PREEMPTED. vLLM sets it when it evicts a running request to make room in
  the KV cache, resets ``num_computed_tokens`` to 0, bumps ``num_preemptions`` and puts the
  request back at the front of the waiting queue; the status stays PREEMPTED until the
  request is scheduled again (then RUNNING, recomputing prompt and output so far).
* any other state (WAITING, or one of the blocked WAITING_FOR_* states) -> WAITING, or
  PREEMPTED if ``num_preemptions > 0`` (vLLM only parks a preempted request in those states
  transiently, e.g. during a KV load); a state this stepview does not know, too.

Which is which is the table of vLLM's states (:mod:`~stepview.engine.records.request_states`).

Each entry also carries what the step did for the request: the tokens it got, the KV blocks
it holds, its prefix-cache hit, and, for a request that waits for a reason of its own, that
reason (:class:`~stepview.engine.records.waiting_reasons.QueueView`, its blocker named by the
caller's id). The reason the rest of the queue shares is :attr:`EntryReader.queue_reason`, one
value per step; :attr:`EntryReader.budget` is how the step spent its token budget.

A request the client no longer tracks is skipped: the record was captured when ``schedule()``
ran, before the step's outputs finished it, and the step's outputs report it. Children of an
``n > 1`` request are merged: the most advanced state wins (in :class:`RequestState` order),
computed tokens are the maximum, preemptions, scheduled tokens and KV blocks the sum.

Cost is what the record changed: the reader keeps the latest facts of every request (records
carry only what changed, see :mod:`~stepview.engine.records.facts`) and rebuilds the entries of
the requests a record names, plus the few whose reason of their own may have come or gone (the
request the scan stopped at, now and before; those preempted in the previous step; those set
aside or blocked). :meth:`EntryReader.read` returns only the entries that changed; one that did
not change keeps its object, so the driver can also tell "unchanged" by identity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import chain

import msgspec

from stepview.engine.records.facts import EndedFacts, RequestFacts, StepFacts
from stepview.engine.records.request_states import RUNNING, SCANNED, WAITING_STATE
from stepview.engine.records.waiting_reasons import QueueView, step_budget
from stepview.model.engine_api import SchedulerEntry
from stepview.model.scheduling import StepBudget, WaitReason
from stepview.model.snapshot import RequestState

_WAITING = RequestState.WAITING
_PREEMPTED = RequestState.PREEMPTED
_PREFILLING = RequestState.PREFILLING
_DECODING = RequestState.DECODING
# "Most advanced" for merging the children of an n > 1 request.
_RANK = {_WAITING: 0, _PREEMPTED: 1, _PREFILLING: 2, _DECODING: 3}
_CORE_RUNNING = RUNNING


def _state(req: RequestFacts) -> RequestState:
    """stepview's state of one engine-core request (the module docstring's rules)."""
    core_state = req.state
    if core_state == _CORE_RUNNING:
        return _PREFILLING if req.num_computed_tokens < req.num_prompt_tokens else _DECODING
    if req.num_preemptions > 0:
        return _PREEMPTED
    return WAITING_STATE.get(core_state, _WAITING)


class _Held:
    """One engine-core request (a sample) the reader was told of: its latest facts, and the
    caller's request it belongs to, once known. One lookup finds all of it."""

    __slots__ = ("facts", "request")

    def __init__(self, facts: RequestFacts) -> None:
        self.facts = facts
        self.request: _Request | None = None


class _Request:
    """A caller's request: its samples, and the entry the reader last gave it."""

    __slots__ = ("caller", "entry", "samples")

    def __init__(self, caller: str) -> None:
        self.caller = caller
        self.samples: list[_Held] = []
        self.entry: SchedulerEntry | None = None


class EntryReader:
    """Reads one engine core's records for one client, keyed by the caller's request ids.

    ``client_id`` maps an engine-core id to the caller's id, or ``None`` for a request the
    client no longer tracks. Feed it every record, in order, from the first full one on (a
    change record read without the records before it would leave it wrong; see
    :class:`RecordStream`). :attr:`new_preemptions` is the number of preemptions the last
    :meth:`read` saw (increases of ``num_preemptions``).
    """

    def __init__(self, client_id: Callable[[str], str | None], queue: int = 0) -> None:
        """``queue``: the number this core's queue has in the snapshot (a watched server's
        ranks are several queues; stepview's own engine is queue 0)."""
        self._client_id = client_id
        self._queue = queue
        self._held: dict[str, _Held] = {}  # core id -> what is known of it
        self._requests: dict[str, _Request] = {}  # caller's id -> its request
        self._marked: set[str] = set()  # core ids that had a reason of their own last time
        self._set_aside: set[str] = set()  # core ids vLLM set aside or that are blocked
        self._head: str | None = None
        self._preempted: Iterable[str] = ()  # core ids preempted in the last record
        self.new_preemptions = 0
        self.budget: StepBudget | None = None  # of the last record read
        self.queue_reason: WaitReason | None = None  # what the last record's queue shares

    def _name(self, internal_id: str) -> str:
        """The caller's id for an engine-core id, or the core's when the caller has none."""
        return self._client_id(internal_id) or internal_id

    @property
    def known(self) -> int:
        """Requests (engine-core samples) whose facts the reader holds."""
        return len(self._held)

    def read(self, facts: StepFacts) -> dict[str, SchedulerEntry]:
        """The entries that changed with this record, keyed by the caller's id (a new dict
        each call: callers may keep it, they must not mutate it)."""
        budget = step_budget(facts)
        if budget != self.budget:
            self.budget = budget
        known = self._held
        set_aside = self._set_aside
        touched: dict[str, _Held] = {}  # the samples to look at again
        if facts.full:
            present = {r.req_id for r in facts.requests}
            for core_id in [c for c in known if c not in present]:
                self._drop(core_id)
        for req in facts.requests:
            core_id = req.req_id
            held = known.get(core_id)
            if held is None:
                held = known[core_id] = _Held(req)
            else:
                held.facts = req
            touched[core_id] = held
            if req.deferred or req.state not in SCANNED:  # blocked (or unknown)
                set_aside.add(core_id)
            elif set_aside:
                set_aside.discard(core_id)
        for core_id in facts.finished:
            if core_id in known:
                touched.pop(core_id, None)
                self._drop(core_id)
        queue = QueueView(facts, self._name)
        shared = queue.shared
        if shared != self.queue_reason:
            self.queue_reason = shared
        # Whose reason of their own may have come or gone without their facts changing.
        head = facts.waiting_head
        for other in chain(self._marked, self._preempted, set_aside, (head, self._head)):
            if other is not None and other not in touched:
                held = known.get(other)
                if held is not None:
                    touched[other] = held
        self._head, self._preempted = head, facts.preempted
        marked: set[str] = set()
        own: dict[str, WaitReason] = {}
        own_reason = queue.own
        for core_id, held in touched.items():
            if held.facts.state == _CORE_RUNNING:  # (the many: no reason to look for)
                continue
            reason = own_reason(held.facts)
            if reason is not None:
                own[core_id] = reason
                marked.add(core_id)
        self._marked = marked
        result: dict[str, SchedulerEntry] = {}
        preemptions = 0
        done: set[int] = set()
        for core_id, held in touched.items():
            request = held.request or self._join(core_id, held)
            if request is None or (len(request.samples) > 1 and id(request) in done):
                continue
            if len(request.samples) > 1:
                done.add(id(request))
            entry = self._entry(request, own)
            previous = request.entry
            if previous is None:
                preemptions += entry.num_preemptions
            elif entry == previous:
                continue
            elif entry.num_preemptions > previous.num_preemptions:
                preemptions += entry.num_preemptions - previous.num_preemptions
            request.entry = result[request.caller] = entry
        self.new_preemptions = preemptions
        return result

    def _join(self, core_id: str, held: _Held) -> _Request | None:
        """The caller's request a sample first seen belongs to (``None``: none any more)."""
        caller = self._client_id(core_id)
        if caller is None:  # finished or aborted on the client's side
            return None
        request = self._requests.get(caller)
        if request is None:
            request = self._requests[caller] = _Request(caller)
        request.samples.append(held)
        held.request = request
        return request

    def _entry(self, request: _Request, own: dict[str, WaitReason]) -> SchedulerEntry:
        """The merged entry of a request from its samples' latest facts."""
        merged: SchedulerEntry | None = None
        for held in request.samples:
            req = held.facts
            state = _state(req)
            prompt = req.num_prompt_tokens
            computed = min(req.num_computed_tokens, prompt)
            reason = own.get(req.req_id) if own else None
            if merged is None:
                merged = SchedulerEntry(
                    state,
                    prompt,
                    computed,
                    req.num_preemptions,
                    reason,
                    req.num_scheduled_tokens,
                    req.num_kv_blocks,
                    req.num_cached_tokens,
                    self._queue,
                )
                continue
            if _RANK[merged.state] > _RANK[state]:
                state = merged.state
            merged = SchedulerEntry(
                state,
                max(prompt, merged.prompt_tokens),
                max(computed, merged.computed_prompt_tokens),
                req.num_preemptions + merged.num_preemptions,
                # A sample that waits says why only while none of the others runs.
                merged.wait_reason or reason if _RANK[state] < _RANK[_PREFILLING] else None,
                req.num_scheduled_tokens + merged.scheduled_tokens,
                req.num_kv_blocks + merged.kv_blocks,
                max(req.num_cached_tokens, merged.cached_prompt_tokens),
                self._queue,
            )
        assert merged is not None  # a request has a sample from its first one on
        return merged

    def _drop(self, core_id: str) -> None:
        """A sample left the engine core: forget it (and its request, once every sample has)."""
        held = self._held.pop(core_id, None)
        self._set_aside.discard(core_id)
        if held is None or held.request is None:
            return
        request = held.request
        if held in request.samples:
            request.samples.remove(held)
        if not request.samples:
            self._requests.pop(request.caller, None)

    def forget(self, request_ids: list[str]) -> None:
        """Drop requests aborted between steps (so a reused id starts fresh)."""
        for caller in request_ids:
            request = self._requests.pop(caller, None)
            if request is not None:
                for held in list(request.samples):
                    self._drop(held.facts.req_id)


def merge_records(older: StepFacts, newer: StepFacts) -> StepFacts:
    """Two consecutive records of one engine core as one (:func:`merge_many`)."""
    return merge_many((older, newer))


def merge_many(records: Sequence[StepFacts]) -> StepFacts:
    """Consecutive records of one engine core, oldest first, as one: what a reader that read
    them all would know, for a reader too far behind to read every step (it loses the steps
    in between, not a fact).

    The step's own figures are the newest's; each request's facts are its newest, its output
    token tails joined, its intro kept; the ends and departures of all are kept, so a request
    may both be named and leave in one record (a reader takes in what it names before it
    lets go of what left). Merged onto a full record, it stays full.

    One pass, O(what the records name): a watch thousands of records behind folds them at
    once. Folding them two at a time copied the growing record, and each request's growing
    token tail, for every one: quadratic, and a starved watch spent minutes in it.
    """
    if len(records) == 1:
        return records[0]
    named: dict[str, list[RequestFacts]] = {}  # each request's facts, oldest first
    finished: dict[str, None] = {}  # in order of leaving (the last time said)
    ended: list[EndedFacts] = []
    for facts in records:
        for req in facts.requests:
            found = named.get(req.req_id)
            if found is None:
                named[req.req_id] = [req]
            else:
                found.append(req)
        for request_id in facts.finished:
            finished.pop(request_id, None)
            finished[request_id] = None
        ended.extend(facts.ended)
    return msgspec.structs.replace(
        records[-1],
        full=any(facts.full for facts in records),
        model=next((facts.model for facts in reversed(records) if facts.model), ""),
        requests=[_joined(seen) for seen in named.values()],
        finished=list(finished),
        ended=ended,
    )


def _joined(seen: list[RequestFacts]) -> RequestFacts:
    """A request's facts from consecutive records as one: the newest, with the token tails
    joined in one list, and the oldest intro and vLLM's times where a newer one has none."""
    newest = seen[-1]
    if len(seen) == 1:
        return newest
    first = seen[0]
    tail, end = list(first.new_token_ids), first.num_output_tokens
    intro, scheduled_at, first_token_at = first.intro, first.scheduled_at, first.first_token_at
    for req in seen[1:]:
        tokens = req.new_token_ids
        start = req.num_output_tokens - len(tokens)
        if tail and start == end:  # contiguous: the usual case
            tail.extend(tokens)
        elif tail and end - len(tail) < start < end:  # overlapping: the older part not resent
            del tail[start - (end - len(tail)) :]
            tail.extend(tokens)
        else:  # a gap (the reader notices), none before, or a tail holding it all (resent)
            tail = list(tokens)
        end = req.num_output_tokens
        intro = req.intro if req.intro is not None else intro
        scheduled_at = req.scheduled_at or scheduled_at  # vLLM's times: once each
        first_token_at = req.first_token_at or first_token_at
    return msgspec.structs.replace(
        newest,
        new_token_ids=tail,
        intro=intro,
        scheduled_at=scheduled_at,
        first_token_at=first_token_at,
    )
