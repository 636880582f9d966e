"""The request ledger driven by hand, one step at a time: no thread, no queue, no sleeping.

Each test feeds :class:`RequestLedger` commands and :class:`StepResult` values (from the
deterministic fake engine, or written out by hand) and reads its views after every step.
"""

from __future__ import annotations

from stepview.engine.driver.ledger import RequestLedger
from stepview.model.commands import AddRequest
from stepview.model.engine_api import (
    CompletionUpdate,
    EngineRejected,
    OutputUpdate,
    SchedulerEntry,
    StepResult,
)
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineCounters, RequestState
from stepview.testing.fake_engine import FakeEngine

S = RequestState


class Clock:
    """Driver-clock seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def add(rid: str, prompt: str = "hello there", **spec: object) -> AddRequest:
    return AddRequest(rid, prompt, SamplingSpec(**spec))  # type: ignore[arg-type]


def output(
    rid: str, tokens: list[int], text: str, *, finished: bool = False, index: int = 0
) -> OutputUpdate:
    reason = "length" if finished else None
    sample = CompletionUpdate(index, text, tokens, None, None, reason, None)
    return OutputUpdate(rid, [1, 2, 3], None, (sample,), finished)


def result(
    *outputs: OutputUpdate, scheduled: dict[str, SchedulerEntry] | None = None
) -> StepResult:
    return StepResult(tuple(outputs), scheduled, EngineCounters())


def step(ledger: RequestLedger, engine: FakeEngine, clock: Clock) -> None:
    clock.now += 0.01
    ledger.apply(engine.step(), clock.now)


def states(ledger: RequestLedger) -> dict[str, RequestState]:
    return {view.request_id: view.state for view in ledger.active()}


def test_a_request_moves_from_pending_to_finished_step_by_step() -> None:
    clock, engine = Clock(), FakeEngine()
    ledger = RequestLedger(clock)
    ledger.accept(add("r1", "x" * 100, max_tokens=2))
    assert states(ledger) == {"r1": S.PENDING} and ledger.has_pending
    assert ledger.admit(engine)
    assert states(ledger) == {"r1": S.WAITING} and not ledger.has_pending
    seen = []
    while engine.has_unfinished():
        step(ledger, engine, clock)
        seen.extend(states(ledger).values())
    order = [S.WAITING, S.PREFILLING, S.DECODING]
    assert S.PREFILLING in seen and S.DECODING in seen  # 100 tokens: several prefill chunks
    assert [order.index(s) for s in seen] == sorted(order.index(s) for s in seen)
    assert ledger.active() == ()
    (done,) = ledger.finished()
    assert done.state is S.FINISHED and done.output_tokens == 2
    assert done.computed_prompt_tokens == done.prompt_tokens == 100
    timings = done.timings
    assert timings.arrival == 0.0
    assert timings.scheduled is not None and timings.first_token is not None
    assert timings.arrival < timings.scheduled <= timings.first_token <= timings.finished
    assert timings.finished == clock.now
    assert ledger.take_finished() == [done]
    assert ledger.take_finished() == []  # handed out once


def test_a_request_that_did_not_move_keeps_its_view_object() -> None:
    clock, engine = Clock(), FakeEngine(max_num_seqs=1)
    ledger = RequestLedger(clock)
    ledger.accept(add("first", max_tokens=6))
    ledger.accept(add("second", max_tokens=6))
    ledger.admit(engine)
    step(ledger, engine, clock)
    step(ledger, engine, clock)
    before = {v.request_id: v for v in ledger.active()}
    step(ledger, engine, clock)
    after = {v.request_id: v for v in ledger.active()}
    assert after["second"] is before["second"]  # still waiting: nothing rebuilt
    assert after["first"] is not before["first"]  # decoding: one new token
    assert len(after["first"].completions[0].token_ids) == 1 + len(
        before["first"].completions[0].token_ids
    )


def test_admit_per_step_hands_over_that_many() -> None:
    clock, engine = Clock(), FakeEngine()
    ledger = RequestLedger(clock)
    for i in range(3):
        ledger.accept(add(f"r{i}"))
    assert ledger.admit(engine, limit=1)
    assert states(ledger) == {"r0": S.WAITING, "r1": S.PENDING, "r2": S.PENDING}
    assert ledger.admit(engine, limit=1)
    assert ledger.admit(engine, limit=1)
    assert not ledger.admit(engine, limit=1)  # nothing left to admit


def test_refused_duplicate_and_faulty_requests_are_rejected_with_the_reason() -> None:
    class Faulty(FakeEngine):
        def add_request(self, request_id: str, prompt: str, spec: SamplingSpec) -> None:
            if request_id == "boom":
                raise RuntimeError("driver bug")
            if request_id == "bad":
                raise EngineRejected("top_p must be in (0, 1]")
            super().add_request(request_id, prompt, spec)

    ledger = RequestLedger(Clock())
    ledger.accept(add("ok"))
    ledger.accept(add("ok"))  # the same id again
    ledger.accept(add("late"), refusal="engine is not running")
    ledger.accept(add("bad"))
    ledger.accept(add("boom"))
    ledger.admit(Faulty())
    errors = {v.request_id: (v.state, v.error) for v in ledger.finished()}
    assert errors == {
        "ok": (S.REJECTED, "duplicate request id 'ok'"),
        "late": (S.REJECTED, "engine is not running"),
        "bad": (S.REJECTED, "top_p must be in (0, 1]"),
        "boom": (S.REJECTED, "RuntimeError: driver bug"),
    }
    assert states(ledger) == {"ok": S.WAITING}  # the first "ok" is unharmed


def test_abort_ends_a_pending_or_running_request_and_tells_the_engine_only_when_it_holds_it() -> (
    None
):
    clock, engine = Clock(), FakeEngine()
    ledger = RequestLedger(clock)
    ledger.accept(add("held", max_tokens=50))
    ledger.admit(engine)
    ledger.accept(add("queued"))
    step(ledger, engine, clock)
    assert ledger.abort("queued", engine) is False  # still ours: the engine never saw it
    assert ledger.abort("held", engine) is True
    assert not engine.has_unfinished()
    assert ledger.abort("held", engine) is False  # already finished: left alone
    assert ledger.abort("unknown", engine) is False
    assert [(v.request_id, v.state, v.error) for v in ledger.finished()] == [
        ("queued", S.ABORTED, "aborted by the user"),
        ("held", S.ABORTED, "aborted by the user"),
    ]
    assert ledger.active() == () and not ledger.has_pending
    # An output already in flight for an aborted request is dropped, not resurrected.
    ledger.apply(result(output("held", [5], " the")), 1.0)
    assert ledger.active() == () and ledger.finished_count == 2


def test_end_in_flight_aborts_everything_with_the_reason() -> None:
    clock, engine = Clock(), FakeEngine()
    ledger = RequestLedger(clock)
    ledger.accept(add("running", max_tokens=50))
    ledger.admit(engine)
    step(ledger, engine, clock)
    ledger.accept(add("pending"))
    ledger.end_in_flight("engine failed: boom")
    assert ledger.active() == () and not ledger.has_pending
    assert {(v.request_id, v.state, v.error) for v in ledger.finished()} == {
        ("running", S.ABORTED, "engine failed: boom"),
        ("pending", S.ABORTED, "engine failed: boom"),
    }


def test_without_a_scheduler_view_output_means_decoding() -> None:
    clock = Clock()
    ledger = RequestLedger(clock)
    ledger.accept(add("r"))
    ledger.admit(FakeEngine())
    ledger.apply(result(output("r", [7], " the")), 0.5)
    (view,) = ledger.active()
    assert view.state is S.DECODING
    assert view.timings.scheduled == view.timings.first_token == 0.5
    assert view.computed_prompt_tokens == view.prompt_tokens == 3
    assert view.completions[0].text == " the"
    ledger.apply(result(output("r", [7, 8], " the engine", finished=True)), 0.75)
    (done,) = ledger.finished()
    assert done.state is S.FINISHED and done.timings.finished == 0.75
    assert done.completions[0].text == " the engine"
    assert list(done.completions[0].token_ids) == [7, 8]


def test_a_finish_said_twice_in_one_step_finishes_the_request_once() -> None:
    """Records read as one (an attached watch catching up after a resync) may carry a
    request's end twice: one finished request, and the watch goes on (it once failed with
    ``KeyError`` there, ending a long watch)."""
    clock = Clock()
    ledger = RequestLedger(clock)
    ledger.accept(add("r"))
    ledger.admit(FakeEngine())
    ends = [output("r", [7, 8], " the engine", finished=True) for _ in range(2)]
    ledger.apply(result(*ends), 0.5)
    (done,) = ledger.finished()
    assert done.state is S.FINISHED and list(done.completions[0].token_ids) == [7, 8]
    assert ledger.active() == ()


def test_the_scheduler_entry_sets_state_and_progress() -> None:
    ledger = RequestLedger(Clock())
    ledger.accept(add("r"))
    ledger.admit(FakeEngine())
    entry = SchedulerEntry(S.PREFILLING, 100, 40, 0)
    ledger.apply(result(scheduled={"r": entry}), 0.25)
    (view,) = ledger.active()
    assert (view.state, view.prompt_tokens, view.computed_prompt_tokens) == (S.PREFILLING, 100, 40)
    assert view.timings.scheduled == 0.25
    ledger.apply(result(scheduled={"r": entry}), 0.5)  # the same entry object: nothing to do
    assert ledger.active()[0] is view
    ledger.apply(result(scheduled={"r": SchedulerEntry(S.PREEMPTED, 100, 0, 1)}), 0.75)
    (view,) = ledger.active()
    assert (view.state, view.computed_prompt_tokens, view.num_preemptions) == (S.PREEMPTED, 0, 1)
    assert view.timings.scheduled == 0.25  # first scheduled, not re-dated by the preemption


def test_n2_keeps_every_sample_though_the_final_output_carries_one() -> None:
    ledger = RequestLedger(Clock())
    ledger.accept(add("r", n=2, temperature=0.8))
    ledger.admit(FakeEngine())
    ledger.apply(result(output("r", [1], " a", index=0), output("r", [2], " b", index=1)), 0.1)
    ledger.apply(result(output("r", [1, 3], " a c", index=1, finished=True)), 0.2)
    (done,) = ledger.finished()
    assert [c.text for c in done.completions] == [" a", " a c"]
    assert done.output_tokens == 3


def test_scheduler_figures_and_wait_reasons_reach_the_views() -> None:
    from stepview.model.scheduling import KV_CACHE, NOT_ADMITTED, WaitReason

    clock = Clock()
    ledger = RequestLedger(clock)
    engine = FakeEngine(max_num_seqs=4)
    ledger.accept(add("a"))
    ledger.accept(add("b"))
    held = ledger.active()[1]
    assert held.wait_reason is not None and held.wait_reason.code == NOT_ADMITTED
    ledger.admit(engine, limit=1)  # b stays in stepview's own queue
    a = ledger.active()[0]
    assert a.state is S.WAITING and a.wait_reason is None
    assert ledger.active()[1] is held

    kv = WaitReason(KV_CACHE, "needs 2 more KV blocks, 0 free")
    ledger.apply(result(scheduled={"a": SchedulerEntry(S.WAITING, 3, 0, 0, kv)}), 1.0)
    waiting = ledger.active()[0]
    assert waiting.wait_reason == kv and waiting.kv_blocks == 0
    # The same figures again (a new but equal entry): the very same view.
    same = SchedulerEntry(S.WAITING, 3, 0, 0, WaitReason(KV_CACHE, kv.text))
    ledger.apply(result(scheduled={"a": same}), 1.5)
    assert ledger.active()[0] is waiting

    running = SchedulerEntry(S.PREFILLING, 3, 2, 0, None, 2, 3, 1)
    ledger.apply(result(scheduled={"a": running}), 2.0)
    view = ledger.active()[0]
    assert (view.wait_reason, view.scheduled_tokens, view.kv_blocks) == (None, 2, 3)
    assert (view.peak_kv_blocks, view.cached_prompt_tokens) == (3, 1)
    preempted = SchedulerEntry(S.PREEMPTED, 3, 0, 1, kv, 0, 0, 1)
    ledger.apply(result(scheduled={"a": preempted}), 3.0)
    view = ledger.active()[0]
    assert (view.kv_blocks, view.peak_kv_blocks, view.wait_reason) == (0, 3, kv)
