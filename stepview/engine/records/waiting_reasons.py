"""Why each waiting or preempted request was not scheduled in a step, by the running vLLM's rules.

The scheduler plug-in (:mod:`stepview.engine.plugin.scheduler`, the probe) records what vLLM's
``Scheduler.schedule()`` left behind; this module decides, from that one record and nothing
else (plain data, no vLLM import, so a watched server's records are read the same way), why
every request that waits was left out. It sits next to the probe because the rules are those
of the vLLM version the probe reads, and change with it. How ``schedule()`` decides:

1. It schedules the RUNNING requests first. When one of them cannot get KV blocks it
   preempts running requests (the newest, or the lowest priority) until it can; a step that
   preempted anyone **skips the waiting queue entirely**: every waiting request is then left
   out for the KV cache (:data:`KV_CACHE`), the preempted ones too.
2. Then it scans the waiting queue(s) front to back (requests that hold KV blocks first, then
   the others; first come first served, or by priority; from vLLM 0.34 cache-aware
   admission may put a cached prefix first within a window) ``while token_budget > 0`` and
   while fewer than ``max_num_seqs`` requests run: those two limits apply to everyone left
   (:data:`TOKEN_BUDGET`, :data:`MAX_NUM_SEQS`). Paused (vLLM's ``pause_scheduler``), it
   admits no new request, or schedules nothing at all (:data:`DEFERRED`, for everyone).
3. A request blocked on something (grammar compilation, a remote KV load, more streamed
   input) or over the LoRA limit is set aside (``deferred_waiting``) and the scan goes on
   (:data:`DEFERRED`); from vLLM 0.33 on, so is one its encoder inputs or speculative
   lookahead leave no token to schedule (0.32 stopped the scan there, as in 4). From 0.33 the
   LoRA limit counts the adapters of every running request, before only of those scheduled.
   From 0.34, with a KV connector and ``max_num_inflight_kv_loads``, requests that may load
   their KV cache asynchronously wait in a queue of their own; one whose load would pass that
   cap waits at its head (:data:`DEFERRED`, its own reason, not the KV cache's).
4. The first other request it cannot schedule (``allocate_slots`` finds too few free KV
   blocks, or, without chunked prefill, its prompt does not fit the budget left) **stops the
   scan**: that request is left out for that reason, and every request after it in the queue
   only because it is behind that one (:data:`BEHIND`).
5. With ``prefill_schedule_interval`` N > 1 vLLM admits prefills only every N steps while
   requests decode, and the scan stops at the first request with a prompt to compute
   (:data:`DEFERRED`, for everyone); vLLM 0.32 did so only under data parallelism, 0.33 in
   any engine core. The plug-in reads which steps were held by the running version's rule.

What differs between vLLM versions is named once, in :mod:`~.vllm_versions`; the record says
which version the engine core runs, and the texts follow its rules.

The record is taken after ``schedule()``, so the rules read the outcome: the queue left
behind (the request the scan stopped at, which the plug-in names), the budget spent, the
requests now running. Everyone after the stopped request waits for the same reason, so that
reason is worked out once per step (:class:`QueueView`), and only the few requests with a
reason of their own are looked at one by one. Limits of the reading: ``deferred`` is
vLLM's set, which keeps a request from its first skip until it is scheduled (a LoRA-limited
request the scan later stopped at still reads as deferred); a KV-connector miss, speculative
decoding and encoder budgets are not told apart from the cases above; with vLLM 0.34's queue
of KV loads, the requests behind the one held at the load cap read as behind the request
where the scan stopped (the record does not say which queue each waits in).
"""

from __future__ import annotations

from collections.abc import Callable

from stepview.engine.records.facts import RequestFacts, StepFacts
from stepview.engine.records.request_states import RUNNING, SCANNED, blocked_reason
from stepview.engine.records.vllm_versions import rules_for
from stepview.model.scheduling import (
    BEHIND,
    DEFERRED,
    KV_CACHE,
    MAX_NUM_SEQS,
    TOKEN_BUDGET,
    StepBudget,
    WaitReason,
)

_RUNNING = RUNNING


def step_budget(facts: StepFacts) -> StepBudget:
    """How the step spent its token budget, and the KV cache after it."""
    return StepBudget(
        facts.token_budget,
        facts.prefill_tokens,
        facts.decode_tokens,
        facts.kv_free_blocks,
        facts.kv_total_blocks,
    )


def _spent(facts: StepFacts) -> str:
    return (
        f"budget {facts.token_budget} spent: {facts.prefill_tokens} prefill, "
        f"{facts.decode_tokens} decode"
    )


class QueueView:
    """Why waiting requests got nothing in one step, in two parts, so a request that only
    waits costs nothing per step.

    Most waiting requests share their reason with the whole queue: every running slot taken,
    the budget spent, a preemption that stopped admission, or, when vLLM's scan stopped at a
    request it could not schedule, "behind" that request. That shared reason is
    :attr:`shared` (one object for the step, ``None`` when nothing is shared). A few have a
    reason of their own (:meth:`own`): a blocked request, one preempted in this step, one vLLM
    set aside, and the request the scan stopped at. A request's reason is its own, or else the
    shared one: :func:`stepview.model.scheduling.reason_of` is that rule, for everyone.

    ``name`` turns an engine-core id into the one a person knows (the caller's), for the texts
    and :attr:`WaitReason.blocker`.
    """

    __slots__ = ("_capped", "_name", "_preempted", "common", "facts", "shared")

    def __init__(self, facts: StepFacts, name: Callable[[str], str] = str) -> None:
        self.facts = facts
        self._name = name
        self._preempted = frozenset(facts.preempted)
        # Held at the in-flight KV-load cap by this step's scan (none when it did not scan).
        self._capped = () if facts.preempted or facts.paused else facts.kv_load_capped
        self.common = _common(facts, name)
        """The step-wide reason everyone without a blocked status shares, if any."""
        self.shared = self.common if self.common is not None else self._behind()

    def _behind(self) -> WaitReason | None:
        head = self.facts.waiting_head
        if head is None:
            return None
        who = self._name(head)
        order = "priority order" if self.facts.priority_policy else "first come, first served"
        if self.facts.cache_aware_window:  # vLLM 0.34's cache-aware admission
            order += f"; a cached prefix first among the next {self.facts.cache_aware_window}"
        return WaitReason(BEHIND, f"behind {who}, which vLLM could not schedule ({order})", who)

    def own(self, req: RequestFacts) -> WaitReason | None:
        """``req``'s reason of its own in this step, or ``None`` (it runs, was scheduled, or
        waits for the shared reason)."""
        state = req.state
        if state == _RUNNING or req.num_scheduled_tokens:
            return None
        if state not in SCANNED:  # blocked, whatever the budget, or a status it cannot name
            return blocked_reason(state, req.unknown_status)
        facts = self.facts
        if req.req_id in self._preempted:
            return WaitReason(
                KV_CACHE,
                f"preempted this step to free KV blocks for running requests "
                f"({facts.kv_free_blocks} of {facts.kv_total_blocks} free)",
            )
        if req.req_id in self._capped:  # its load may start with no slot or budget left
            return WaitReason(
                DEFERRED,
                f"KV-load cap: max_num_inflight_kv_loads={facts.max_kv_loads} loads in "
                f"flight; its KV cache loads when one is done",
            )
        if self.common is not None:
            return None
        if req.deferred:
            return _deferred(req, facts)
        if req.req_id == facts.waiting_head:
            return _stopped_at(req, facts, facts.num_waiting + facts.num_running)
        return None


def _common(facts: StepFacts, name: Callable[[str], str]) -> WaitReason | None:
    """The reason of the whole step, when vLLM did not scan the waiting queue or could not
    admit anyone from it: a preemption, the token budget, the running slots."""
    if facts.preempted:
        names = ", ".join(name(i) for i in facts.preempted)
        return WaitReason(
            KV_CACHE,
            f"KV cache full: this step preempted {names}, so vLLM admitted no waiting request "
            f"({facts.kv_free_blocks} of {facts.kv_total_blocks} blocks free)",
        )
    if facts.paused:
        what = "schedules nothing" if facts.paused > 1 else "admits no waiting request"
        return WaitReason(DEFERRED, f"vLLM's scheduler is paused: it {what} until resumed")
    if facts.token_budget - facts.prefill_tokens - facts.decode_tokens <= 0:
        return WaitReason(TOKEN_BUDGET, _spent(facts))
    if facts.num_running >= facts.max_num_running_reqs:
        return WaitReason(
            MAX_NUM_SEQS, f"all {facts.max_num_running_reqs} running slots taken (max_num_seqs)"
        )
    if facts.prefills_held:
        every = facts.prefill_interval
        return WaitReason(
            DEFERRED,
            f"prefill held: prefill_schedule_interval={every} admits prompts every {every} "
            f"steps while requests decode",
        )
    return None


def _deferred(req: RequestFacts, facts: StepFacts) -> WaitReason:
    """vLLM set ``req`` aside (``deferred_waiting``) without a blocked status."""
    rules = rules_for(facts.vllm_version)
    if req.lora_id and facts.max_loras:
        beside = (
            "every running request's (scheduled this step or not)"
            if rules.loras_of_running
            else "those of the requests scheduled this step"
        )
        return WaitReason(
            DEFERRED,
            f"LoRA limit: its adapter would exceed max_loras={facts.max_loras} beside {beside}",
        )
    if rules.zero_tokens_set_aside:
        return WaitReason(
            DEFERRED,
            "set aside by vLLM this step (e.g. a KV connector not ready, or its encoder "
            "inputs or speculative lookahead left it no token to schedule)",
        )
    return WaitReason(DEFERRED, "set aside by vLLM this step (e.g. a KV connector not ready)")


def _stopped_at(req: RequestFacts, facts: StepFacts, eligible: int) -> WaitReason:
    """Why the waiting scan stopped at ``req`` while budget and running slots were left.

    The tokens it asked for are what it still has to compute (prompt and output so far; a
    preempted request recomputes both), capped by ``long_prefill_token_threshold`` when other
    requests compete (from vLLM 0.34, only with chunked prefill) and by the budget left; the
    blocks are those the tokens need beyond what it holds. The prefix cache might have served
    part of it: vLLM found too few blocks even so.
    """
    left = facts.token_budget - facts.prefill_tokens - facts.decode_tokens
    need = req.num_prompt_tokens + req.num_output_tokens - req.num_computed_tokens
    cap = facts.long_prefill_threshold
    if rules_for(facts.vllm_version).prefill_cap_needs_chunking and not facts.chunked_prefill:
        cap = 0  # vLLM 0.34 on: the cap is a chunking rule
    if 0 < cap < need and eligible > 1:
        need = cap
    if not facts.chunked_prefill and need > left:
        return WaitReason(
            TOKEN_BUDGET,
            f"{_spent(facts)}; its {need} tokens do not fit the {left} left (no chunked prefill)",
        )
    tokens = req.num_computed_tokens + min(need, left)
    size = max(1, facts.block_size)
    blocks = max(0, -(-tokens // size) - req.num_kv_blocks)
    free = facts.kv_free_blocks
    if blocks > free:
        noun = "block" if blocks == 1 else "blocks"
        return WaitReason(KV_CACHE, f"needs {blocks} more KV {noun}, {free} free")
    # allocate_slots refused with enough blocks free on paper (vLLM keeps some back, e.g. for
    # the whole prompt or speculative slots): still the KV cache, in vLLM's own accounting.
    # Before vLLM 0.33 a request its encoder inputs or speculative lookahead left no token
    # also stopped the scan here (since, vLLM sets it aside: _deferred).
    noun = "block" if blocks == 1 else "blocks"
    text = f"vLLM did not allocate its {blocks} KV {noun} ({free} free)"
    if not rules_for(facts.vllm_version).zero_tokens_set_aside:
        text += ", or its encoder inputs or speculative lookahead left it no token"
    return WaitReason(KV_CACHE, text)
