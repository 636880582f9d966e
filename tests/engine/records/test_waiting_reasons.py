"""The waiting-reason rules over hand-built records: one situation of vLLM's schedule() each.

A record names the request vLLM's scan stopped at (``waiting_head``, what the plug-in finds at
the front of the queue); :func:`wait_reasons` below reads every waiting request's reason as
the app does (its own, else the one its queue shares).
"""

from __future__ import annotations

from typing import Any

from stepview.engine.records.facts import RequestFacts, StepFacts
from stepview.engine.records.request_states import CoreState
from stepview.engine.records.waiting_reasons import QueueView, step_budget
from stepview.model.scheduling import (
    BEHIND,
    DEFERRED,
    KV_CACHE,
    MAX_NUM_SEQS,
    TOKEN_BUDGET,
    StepBudget,
    WaitReason,
)

W, R, P = int(CoreState.WAITING), int(CoreState.RUNNING), int(CoreState.PREEMPTED)
_BLOCKED = {int(CoreState.WAITING_FOR_GRAMMAR), int(CoreState.WAITING_FOR_REMOTE_KVS)}


def req(
    req_id: str,
    state: int,
    prompt: int = 40,
    computed: int = 0,
    scheduled: int = 0,
    blocks: int = 0,
    outputs: int = 0,
    **extra: Any,
) -> RequestFacts:
    return RequestFacts(
        req_id, state, prompt, computed, outputs, 0, scheduled, blocks, 0, 0.0, 0, 16, **extra
    )


def facts(
    requests: list[RequestFacts],
    budget: int = 256,
    prefill: int = 0,
    decode: int = 0,
    seqs: int = 8,
    free: int = 100,
    preempted: tuple[str, ...] = (),
    order: list[str] | None = None,
    **extra: Any,
) -> StepFacts:
    """A full record; ``order`` is the waiting queue's scan order (default: as listed), and
    the head the first in it neither set aside nor blocked, as the plug-in finds it."""
    waiting = [r for r in requests if r.state != R]
    by_id = {r.req_id: r for r in requests}
    scan = [by_id[i] for i in order] if order is not None else waiting
    head = next((r.req_id for r in scan if not r.deferred and r.state not in _BLOCKED), None)
    running = len(requests) - len(waiting)
    return StepFacts(
        1, 1, 0.0, 0.0, 0, 1, True, budget, prefill, decode, seqs, running, len(waiting),
        free, 200, 16, list(preempted), [], requests, waiting_head=head, **extra,
    )  # fmt: skip


def wait_reasons(record: StepFacts, name: Any = str) -> dict[str, WaitReason]:
    """Every waiting request's reason: its own, or the one its queue shares."""
    queue = QueueView(record, name)
    reasons = {}
    for r in record.requests:
        if r.state == R or r.state > P or r.num_scheduled_tokens:
            continue
        reason = queue.own(r) or queue.shared
        if reason is not None:
            reasons[r.req_id] = reason
    return reasons


def test_running_and_scheduled_requests_have_no_reason() -> None:
    record = facts([req("a", R, computed=40, scheduled=1, blocks=3)], decode=1)
    assert wait_reasons(record) == {}


def test_every_running_slot_taken() -> None:
    running = [req(f"r{i}", R, computed=41, scheduled=1, blocks=3) for i in range(2)]
    record = facts([*running, req("w1", W), req("w2", W)], decode=2, seqs=2)
    reasons = wait_reasons(record)
    assert {r.code for r in reasons.values()} == {MAX_NUM_SEQS}
    assert set(reasons) == {"w1", "w2"}
    assert "2 running slots" in reasons["w1"].text


def test_budget_spent_says_how() -> None:
    running = [req("a", R, prompt=300, computed=200, scheduled=200, blocks=13)]
    decoding = [req("b", R, computed=40 + 56, scheduled=56, blocks=6)]
    record = facts([*running, *decoding, req("w", W)], prefill=200, decode=56)
    reason = wait_reasons(record)["w"]
    assert reason.code == TOKEN_BUDGET
    assert reason.text == "budget 256 spent: 200 prefill, 56 decode"
    assert step_budget(record) == StepBudget(256, 200, 56, 100, 200)
    assert step_budget(record).unused_tokens == 0


def test_kv_cache_stops_the_scan_and_the_rest_are_behind() -> None:
    # 48 prompt tokens at 16 per block: 3 blocks needed, 1 free; the scan stops at r3.
    record = facts(
        [req("r1", R, computed=41, scheduled=1, blocks=3), req("r3", W, prompt=48),
         req("r4", W), req("r5", W)],
        decode=1, free=1, order=["r3", "r4", "r5"],
    )  # fmt: skip
    reasons = wait_reasons(record, name=str.upper)
    assert reasons["r3"].code == KV_CACHE
    assert reasons["r3"].text == "needs 3 more KV blocks, 1 free"
    assert reasons["r4"].code == BEHIND and reasons["r4"].blocker == "R3"
    assert "R3" in reasons["r5"].text and "first come" in reasons["r5"].text


def test_only_the_head_has_a_reason_of_its_own_the_queue_shares_one() -> None:
    record = facts([req("pre", P, outputs=4, blocks=0), *(req(f"w{i}", W) for i in range(50))],
                   free=0)  # fmt: skip
    queue = QueueView(record)
    own = {r.req_id: queue.own(r) for r in record.requests}
    assert own["pre"] is not None and own["pre"].code == KV_CACHE
    assert own["pre"].text == "needs 3 more KV blocks, 0 free"  # 44 tokens to recompute
    assert all(own[f"w{i}"] is None for i in range(50))  # they cost nothing of their own
    assert queue.shared is not None and queue.shared.blocker == "pre"


def test_a_step_that_preempted_admits_nobody() -> None:
    record = facts(
        [req("r1", R, computed=41, scheduled=1, blocks=3), req("r2", P, outputs=2),
         req("w", W)],
        decode=1, free=0, preempted=("r2",),
    )  # fmt: skip
    reasons = wait_reasons(record)
    assert reasons["r2"].code == KV_CACHE and "preempted this step" in reasons["r2"].text
    assert reasons["w"].code == KV_CACHE and "preempted r2" in reasons["w"].text


def test_without_chunked_prefill_a_prompt_over_the_budget_left_stops_the_scan() -> None:
    record = facts(
        [req("r", R, computed=41, scheduled=1, blocks=3), req("big", W, prompt=300),
         req("small", W, prompt=10)],
        decode=1, chunked_prefill=False, order=["big", "small"],
    )  # fmt: skip
    reasons = wait_reasons(record)
    assert reasons["big"].code == TOKEN_BUDGET
    assert "300 tokens do not fit the 255 left" in reasons["big"].text
    assert reasons["small"].code == BEHIND and reasons["small"].blocker == "big"


def test_blocked_and_deferred_requests_say_what_vllm_waits_for() -> None:
    grammar = req("g", int(CoreState.WAITING_FOR_GRAMMAR), deferred=True)
    remote = req("k", int(CoreState.WAITING_FOR_REMOTE_KVS), deferred=True, blocks=3)
    lora = req("l", W, deferred=True, lora_id=2)
    record = facts(
        [grammar, remote, lora, req("w", W, prompt=48)],
        free=1, max_loras=1, order=["g", "k", "l", "w"],
    )  # fmt: skip
    reasons = wait_reasons(record)
    assert reasons["g"].code == DEFERRED and "grammar" in reasons["g"].text
    assert reasons["k"].code == DEFERRED and "KV transfer" in reasons["k"].text
    assert reasons["l"].code == DEFERRED and "max_loras=1" in reasons["l"].text
    assert reasons["w"].code == KV_CACHE  # the scan went past the deferred ones


def test_blocked_requests_stay_deferred_when_the_budget_is_spent() -> None:
    grammar = req("g", int(CoreState.WAITING_FOR_GRAMMAR), deferred=True)
    record = facts([req("a", R, scheduled=256, computed=256, prompt=500), grammar, req("w", W)],
                   prefill=256)  # fmt: skip
    reasons = wait_reasons(record)
    assert reasons["g"].code == DEFERRED
    assert reasons["w"].code == TOKEN_BUDGET


def test_long_prefill_threshold_caps_what_the_head_asks_for() -> None:
    record = facts(
        [req("r", R, computed=41, scheduled=1, blocks=3), req("w", W, prompt=1000)],
        decode=1, free=2, long_prefill_threshold=64,
    )  # fmt: skip
    assert wait_reasons(record)["w"].text == "needs 4 more KV blocks, 2 free"


def test_priority_policy_names_its_order() -> None:
    record = facts(
        [req("a", W, prompt=48), req("b", W)], free=0, priority_policy=True, order=["a", "b"],
    )  # fmt: skip
    assert "priority order" in wait_reasons(record)["b"].text
