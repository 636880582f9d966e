"""The fake engine says why requests wait, by the same rules and code as for real vLLM.

It writes the record vLLM's engine core would and reads it with the real scheduler view, so
each situation the engine tests build on the demo model
(tests/engine/records/test_waiting_reasons_real.py) gives the same reason here,
deterministically, for the UI tests.
"""

from __future__ import annotations

from stepview.model.engine_api import SchedulerEntry, StepResult
from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import (
    BEHIND,
    KV_CACHE,
    MAX_NUM_SEQS,
    TOKEN_BUDGET,
    StepBudget,
    WaitReason,
)
from stepview.model.snapshot import RequestState
from stepview.testing.fake_engine import FakeEngine

GREEDY = SamplingSpec(temperature=0.0, max_tokens=8)
_WAITS = (RequestState.WAITING, RequestState.PREEMPTED)


def add(engine: FakeEngine, count: int, prompt: str = "hello") -> None:
    for i in range(count):
        engine.add_request(f"r{i}", prompt, GREEDY)


def why(result: StepResult, entry: SchedulerEntry) -> WaitReason | None:
    """The entry's reason: its own, or the one its queue shares (as the app reads it)."""
    if entry.wait_reason is not None or entry.state not in _WAITS:
        return entry.wait_reason
    return result.queue_reasons[entry.queue]


def reasons(result: StepResult) -> dict[str, tuple[str, str | None]]:
    assert result.scheduled is not None
    return {
        rid: (reason.code, reason.blocker)
        for rid, entry in result.scheduled.items()
        if (reason := why(result, entry)) is not None
    }


def test_all_running_slots_taken() -> None:
    engine = FakeEngine(max_num_seqs=2, max_num_batched_tokens=256)
    add(engine, 6)
    result = engine.step()
    assert reasons(result) == {f"r{i}": (MAX_NUM_SEQS, None) for i in range(2, 6)}
    assert result.scheduled is not None
    entry = result.scheduled["r5"]
    reason = why(result, entry)
    assert entry.state is RequestState.WAITING and reason is not None
    assert reason.text == "all 2 running slots taken (max_num_seqs)"
    running = result.scheduled["r0"]
    assert (running.scheduled_tokens, running.kv_blocks) == (5, 1)


def test_token_budget_spent_on_a_long_prompt() -> None:
    engine = FakeEngine(max_num_seqs=8, max_num_batched_tokens=64)
    engine.add_request("long", "x" * 100, GREEDY)
    engine.add_request("next", "short", GREEDY)
    result = engine.step()
    assert reasons(result) == {"next": (TOKEN_BUDGET, None)}
    assert result.budget == StepBudget(64, 64, 0, 60, 64)
    assert result.scheduled is not None
    assert result.scheduled["long"].state is RequestState.PREFILLING
    assert result.scheduled["long"].computed_prompt_tokens == 64


def test_kv_cache_full_stops_the_queue_and_names_the_blocked_one() -> None:
    engine = FakeEngine(max_num_seqs=8, max_num_batched_tokens=512, num_kv_blocks=4)
    engine.add_request("big", "y" * 40, GREEDY)  # 3 blocks of 16
    engine.add_request("blocked", "z" * 40, GREEDY)  # 3 more: 1 free
    engine.add_request("after", "a", GREEDY)  # would fit, but waits its turn (FCFS)
    result = engine.step()
    assert reasons(result) == {"blocked": (KV_CACHE, None), "after": (BEHIND, "blocked")}
    assert result.scheduled is not None
    reason = result.scheduled["blocked"].wait_reason  # its own: the scan stopped at it
    assert reason is not None and reason.text == "needs 3 more KV blocks, 1 free"


def test_a_step_that_preempts_admits_nobody_and_says_why() -> None:
    engine = FakeEngine(max_num_seqs=4, max_num_batched_tokens=512, num_kv_blocks=2)
    engine.add_request("a", "p" * 16, SamplingSpec(temperature=0.0, max_tokens=40))
    engine.add_request("b", "q" * 15, SamplingSpec(temperature=0.0, max_tokens=40))
    for _ in range(20):
        result = engine.step()
        assert result.scheduled is not None
        b = result.scheduled.get("b")
        if b is not None and b.state is RequestState.PREEMPTED:
            break
    else:
        raise AssertionError("nobody was preempted")
    assert b.wait_reason is not None and b.wait_reason.code == KV_CACHE
    assert b.wait_reason.text.startswith("preempted this step to free KV blocks")
    assert result.counters.preemptions == 1


def test_a_request_finishing_in_the_step_still_held_its_slot_and_blocks() -> None:
    # Recorded after scheduling, as vLLM's plug-in does: "short" finishes in this step but
    # was running when "w" was left out, so the slots were full, not the KV cache.
    engine = FakeEngine(max_num_seqs=2, max_num_batched_tokens=256, num_kv_blocks=4)
    engine.add_request("short", "s" * 40, SamplingSpec(temperature=0.0, max_tokens=1))
    engine.add_request("long", "l", GREEDY)
    engine.add_request("w", "w", GREEDY)
    result = engine.step()
    assert [o.request_id for o in result.outputs if o.finished] == ["short"]
    assert reasons(result) == {"w": (MAX_NUM_SEQS, None)}
    assert result.scheduled is not None and "short" not in result.scheduled
    assert result.budget == StepBudget(256, 41, 0, 0, 4)
