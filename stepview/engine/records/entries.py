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
  transiently, e.g. during a KV load).

Each entry also carries what the step did for the request: the tokens it got, the KV blocks
it holds, its prefix-cache hit, and, for a request that waits, why it got nothing
(:func:`~stepview.engine.records.waiting_reasons.wait_reasons`, its blocker named by the
caller's id);
:attr:`SchedulerView.budget` is how the step spent its token budget.

A request the client no longer tracks is skipped: the record was captured when ``schedule()``
ran, before the step's outputs finished it, and the step's outputs report it. Children of an
``n > 1`` request are merged: the most advanced state wins (in :class:`RequestState` order),
computed tokens are the maximum, preemptions, scheduled tokens and KV blocks the sum.

Cost matters because this runs after every step: one pass over the record, and entries reused
from the previous step when nothing about the request changed (the common case for decoding
requests), which also lets the driver detect "unchanged" by identity.
"""

from __future__ import annotations

from collections.abc import Callable

from stepview.engine.records.facts import CoreState, StepFacts
from stepview.engine.records.waiting_reasons import step_budget, wait_reasons
from stepview.model.engine_api import SchedulerEntry
from stepview.model.scheduling import StepBudget
from stepview.model.snapshot import RequestState

_WAITING = RequestState.WAITING
_PREEMPTED = RequestState.PREEMPTED
_PREFILLING = RequestState.PREFILLING
_DECODING = RequestState.DECODING
# "Most advanced" for merging the children of an n > 1 request.
_RANK = {_WAITING: 0, _PREEMPTED: 1, _PREFILLING: 2, _DECODING: 3}
_CORE_RUNNING = int(CoreState.RUNNING)
_CORE_PREEMPTED = int(CoreState.PREEMPTED)


class SchedulerView:
    """Reads engine-core records for one client, keyed by the caller's request ids.

    ``client_id`` maps an engine-core id to the caller's id, or ``None`` for a request the
    client no longer tracks. :attr:`new_preemptions` is the number of preemptions between the
    previous :meth:`read` and this one (increases of ``num_preemptions`` over the requests
    still present, so records skipped in between are still counted).
    """

    def __init__(self, client_id: Callable[[str], str | None]) -> None:
        self._client_id = client_id
        self._last: dict[str, SchedulerEntry] = {}
        self.new_preemptions = 0
        self.budget: StepBudget | None = None  # of the last record read

    def _name(self, internal_id: str) -> str:
        """The caller's id for an engine-core id, or the core's when the caller has none."""
        return self._client_id(internal_id) or internal_id

    def read(self, facts: StepFacts) -> dict[str, SchedulerEntry]:
        """The scheduler's view of every unfinished request, keyed by the caller's id.

        A new dict each call (callers may keep it; they must not mutate it).
        """
        client_id = self._client_id
        last = self._last
        result: dict[str, SchedulerEntry] = {}
        merged: list[str] = []  # ids seen more than once (children of n > 1)
        budget = step_budget(facts)
        if budget != self.budget:
            self.budget = budget
        reasons = wait_reasons(facts, self._name)
        for req in facts.requests:
            external_id = client_id(req.req_id)
            if external_id is None:  # finished or aborted on the client's side
                continue
            core_state = req.state
            prompt = req.num_prompt_tokens
            computed = req.num_computed_tokens
            preemptions = req.num_preemptions
            if core_state == _CORE_RUNNING:
                state = _PREFILLING if computed < prompt else _DECODING
            elif core_state == _CORE_PREEMPTED or preemptions > 0:
                state = _PREEMPTED
            else:
                state = _WAITING
            if computed > prompt:
                computed = prompt
            reason = reasons.get(req.req_id) if reasons else None
            scheduled = req.num_scheduled_tokens
            blocks = req.num_kv_blocks
            cached = req.num_cached_tokens

            other = result.get(external_id)
            if other is not None:  # another child of the same request: merge
                if _RANK[other.state] > _RANK[state]:
                    state = other.state
                result[external_id] = SchedulerEntry(
                    state,
                    max(prompt, other.prompt_tokens),
                    max(computed, other.computed_prompt_tokens),
                    preemptions + other.num_preemptions,
                    # A sample that waits says why only while none of the others runs.
                    other.wait_reason or reason if _RANK[state] < _RANK[_PREFILLING] else None,
                    scheduled + other.scheduled_tokens,
                    blocks + other.kv_blocks,
                    max(cached, other.cached_prompt_tokens),
                )
                merged.append(external_id)
                continue
            previous = last.get(external_id)
            if (
                previous is not None
                and previous.state is state
                and previous.computed_prompt_tokens == computed
                and previous.num_preemptions == preemptions
                and previous.prompt_tokens == prompt
                and previous.scheduled_tokens == scheduled
                and previous.kv_blocks == blocks
                and previous.cached_prompt_tokens == cached
                and previous.wait_reason == reason
            ):
                result[external_id] = previous
            else:
                result[external_id] = SchedulerEntry(
                    state, prompt, computed, preemptions, reason, scheduled, blocks, cached
                )

        for external_id in merged:
            previous = last.get(external_id)
            if previous is not None and previous == result[external_id]:
                result[external_id] = previous

        new_preemptions = 0
        for external_id, entry in result.items():
            previous = last.get(external_id)
            if previous is None:
                new_preemptions += entry.num_preemptions
            elif entry is not previous and entry.num_preemptions > previous.num_preemptions:
                new_preemptions += entry.num_preemptions - previous.num_preemptions
        self._last = result
        self.new_preemptions = new_preemptions
        return result

    def forget(self, request_ids: list[str]) -> None:
        """Drop cached entries of requests aborted between steps (so a reused id starts fresh).

        Builds a new dict: the old one was handed out by :meth:`read`.
        """
        gone = set(request_ids)
        if gone & self._last.keys():
            self._last = {k: v for k, v in self._last.items() if k not in gone}
