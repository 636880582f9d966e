"""Read vLLM's scheduler after a step: the only module that touches vLLM private internals.

vLLM's public API says what a request *produced*; it does not say whether a request is still
queued, how far its chunked prefill has got, or that it was preempted. Those facts live only
in the V1 scheduler, which runs in this process when ``VLLM_ENABLE_V1_MULTIPROCESSING=0``:

    LLMEngine.engine_core            InprocClient
             .engine_core            EngineCore
             .scheduler              Scheduler
             .scheduler.requests     internal request id -> vllm.v1.request.Request

``scheduler.requests`` holds every request the scheduler still knows (waiting, preempted and
running; a finished request leaves it in the step it finishes), so the probe walks that one
dict instead of the ``waiting`` queue(s) and ``running`` list, whose shape changes between
versions (0.32 already has ``waiting``, ``kv_holding_waiting`` and ``deferred_waiting``).

How each request's state is derived from a ``Request``, read after ``step()`` returns (the
step's final state: on CPU nothing runs in the background):

* ``status == RUNNING`` -> scheduled. ``num_computed_tokens`` already counts the tokens of
  this step, and also counts generated tokens, so prefill progress is
  ``min(num_computed_tokens, num_prompt_tokens)``: PREFILLING while that is below
  ``num_prompt_tokens`` (a chunked prefill in progress, which produces no output), else
  DECODING.
* ``status == PREEMPTED`` -> PREEMPTED. vLLM sets it when it evicts a running request to make
  room in the KV cache, resets ``num_computed_tokens`` to 0, bumps ``num_preemptions`` and
  puts the request back at the front of the waiting queue; the status stays PREEMPTED until
  the request is scheduled again (then RUNNING, recomputing prompt and output so far).
* any other unfinished status (WAITING, or WAITING_FOR_REMOTE_KVS / _FOR_STRUCTURED_OUTPUT_
  GRAMMAR / _FOR_STREAMING_REQ) -> WAITING, or PREEMPTED if ``num_preemptions > 0`` (vLLM
  only parks a preempted request in those statuses transiently, e.g. during a KV load).
* finished statuses (anything after PREEMPTED in vLLM's ``RequestStatus``) are skipped: the
  request's final output, from ``step()``, is what reports it.

Internal ids (``"<id>-<8 hex>"``, or ``"<i>_<id>-<8 hex>"`` per child of an ``n > 1``
request) map back to the caller's id through
``engine.output_processor.request_states[internal].external_req_id``. Children of one
request are merged: the most advanced state wins (in :class:`RequestState` order), computed
tokens are the maximum, preemptions the sum.

Everything is looked up defensively: when the path is missing (multiprocess mode, another
vLLM version) the probe says so once in the log and returns ``None``, and stepview falls
back to what outputs alone tell. Cost matters because this runs after every step: one pass
over the scheduler's requests, plain attribute reads, and :class:`SchedulerEntry` objects
reused from the previous step when nothing about the request changed (the common case for
decoding requests), which also lets the driver detect "unchanged" by identity.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from stepview.model.engine_api import SchedulerEntry
from stepview.model.snapshot import RequestState

log = logging.getLogger(__name__)

_WAITING = RequestState.WAITING
_PREEMPTED = RequestState.PREEMPTED
_PREFILLING = RequestState.PREFILLING
_DECODING = RequestState.DECODING
# "Most advanced" for merging the children of an n > 1 request.
_RANK = {_WAITING: 0, _PREEMPTED: 1, _PREFILLING: 2, _DECODING: 3}


class SchedulerProbe:
    """Reads the in-process scheduler of one ``vllm.LLMEngine`` after each step.

    Build it once per engine; :attr:`available` says whether the internals were found.
    :meth:`read` returns the caller's request id -> :class:`SchedulerEntry`, or ``None``.
    """

    def __init__(self, engine: Any) -> None:
        self._scheduler: Any = None
        self._request_states: Mapping[str, Any] | None = None
        self._running: Any = None
        self._preempted: Any = None
        self._logged = False
        self._last: dict[str, SchedulerEntry] = {}
        # Preemptions that happened during the last step (sum of num_preemptions increases
        # over requests still in the scheduler; a preempted request always is).
        self.new_preemptions = 0
        try:
            from vllm.v1.request import RequestStatus

            scheduler = engine.engine_core.engine_core.scheduler
            request_states = engine.output_processor.request_states
            if not isinstance(scheduler.requests, dict) or not isinstance(request_states, dict):
                raise TypeError("scheduler.requests / output_processor.request_states not dicts")
            self._running = RequestStatus.RUNNING
            self._preempted = RequestStatus.PREEMPTED
        except Exception as exc:  # any shape mismatch means "not available", never a crash
            self._give_up(f"scheduler internals not found ({type(exc).__name__}: {exc})")
            return
        self._scheduler = scheduler
        self._request_states = request_states

    @property
    def available(self) -> bool:
        return self._scheduler is not None

    def read(self) -> dict[str, SchedulerEntry] | None:
        """The scheduler's view of every unfinished request, keyed by the caller's id.

        A new dict each call (callers may keep it; they must not mutate it).
        """
        if self._scheduler is None:
            return None
        try:
            return self._read()
        except Exception as exc:
            self._give_up(f"reading the scheduler failed ({type(exc).__name__}: {exc})")
            return None

    def forget(self, request_ids: list[str]) -> None:
        """Drop cached entries of requests aborted between steps (so a reused id starts fresh).

        Builds a new dict: the old one was handed out by :meth:`read`.
        """
        gone = set(request_ids)
        if gone & self._last.keys():
            self._last = {k: v for k, v in self._last.items() if k not in gone}

    def _read(self) -> dict[str, SchedulerEntry]:
        running = self._running
        preempted = self._preempted
        request_states = self._request_states
        assert request_states is not None
        last = self._last
        result: dict[str, SchedulerEntry] = {}
        merged: list[str] = []  # ids seen more than once (children of n > 1)
        for internal_id, req in self._scheduler.requests.items():
            status = req.status
            if status > preempted:  # RequestStatus is an IntEnum: later members are finished
                continue
            state_obj = request_states.get(internal_id)
            if state_obj is None:  # aborted from the output side, going away
                continue
            external_id: str = state_obj.external_req_id
            prompt: int = req.num_prompt_tokens
            computed: int = req.num_computed_tokens
            preemptions: int = req.num_preemptions
            if status == running:
                state = _PREFILLING if computed < prompt else _DECODING
            elif status == preempted or preemptions > 0:
                state = _PREEMPTED
            else:
                state = _WAITING
            if computed > prompt:
                computed = prompt

            other = result.get(external_id)
            if other is not None:  # another child of the same request: merge
                if _RANK[other.state] > _RANK[state]:
                    state = other.state
                result[external_id] = SchedulerEntry(
                    state,
                    max(prompt, other.prompt_tokens),
                    max(computed, other.computed_prompt_tokens),
                    preemptions + other.num_preemptions,
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
            ):
                result[external_id] = previous
            else:
                result[external_id] = SchedulerEntry(state, prompt, computed, preemptions)

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
        # A fresh dict each step; the probe only reads its copy of it from now on.
        return result

    def _give_up(self, why: str) -> None:
        self._scheduler = None
        self._request_states = None
        if not self._logged:
            self._logged = True
            log.warning("stepview: per-request scheduler states unavailable: %s", why)
