"""The driver's loop, commands and snapshots, on the deterministic fake engine.

The same properties are checked on real vLLM in tests/engine; here they run in milliseconds
and cover the paths a real engine rarely takes (faults, duplicate ids, start-up failure).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest

from stepview.engine.driver.loop import Driver
from stepview.files.results_file import ResultsWriter
from stepview.model.commands import Abort, AddRequest, Pause, Resume, SingleStep
from stepview.model.engine_api import Engine
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState, StepSnapshot
from stepview.testing.fake_engine import FakeEngine
from tests.helpers import all_done, wait_for, went_round

ORDER = [
    RequestState.PENDING,
    RequestState.WAITING,
    RequestState.PREFILLING,
    RequestState.DECODING,
    RequestState.FINISHED,
]


def make_driver(engine: Engine | None = None, **kwargs: object) -> Driver:
    fake = engine or FakeEngine()
    return Driver(lambda phase: fake, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def driver() -> Iterator[Driver]:
    d = make_driver(history_size=10_000)
    d.start()
    yield d
    d.stop()
    assert not d.alive


def add(d: Driver, rid: str, prompt: str = "hello there", **spec: object) -> None:
    d.send(AddRequest(rid, prompt, SamplingSpec(**spec)))  # type: ignore[arg-type]


def test_states_move_forward_only(driver: Driver) -> None:
    for i in range(8):
        add(driver, f"r{i}", "x" * 40, max_tokens=5, temperature=0.0)
    wait_for(driver, lambda s: len(s.finished) == 8)
    seen: dict[str, list[RequestState]] = {}
    for snap in driver.history():
        for view in snap.requests():
            states = seen.setdefault(view.request_id, [])
            if not states or states[-1] is not view.state:
                states.append(view.state)
    for rid, states in seen.items():
        positions = [ORDER.index(s) for s in states]
        assert positions == sorted(positions), (rid, states)
        assert states[-1] is RequestState.FINISHED
    # max_num_seqs=4 with 8 requests: some waited while others ran.
    assert any(snap.pane("pending") and snap.pane("running") for snap in driver.history())


def test_prefill_progress_never_decreases(driver: Driver) -> None:
    add(driver, "long", "y" * 300, max_tokens=2)  # budget 64 tokens/step: 5 prefill steps
    wait_for(driver, lambda s: len(s.finished) == 1)
    progress = [
        v.computed_prompt_tokens
        for snap in driver.history()
        for v in snap.active
        if v.request_id == "long" and v.state is RequestState.PREFILLING
    ]
    assert len(set(progress)) >= 4
    assert progress == sorted(progress)


def test_preemption_is_recorded() -> None:
    d = make_driver(FakeEngine(num_kv_blocks=6, max_num_batched_tokens=512), history_size=10_000)
    d.start()
    try:
        for i in range(3):
            add(d, f"p{i}", "z" * 30, max_tokens=40, temperature=0.0)
        final = wait_for(d, lambda s: len(s.finished) == 3)
        assert sum(v.num_preemptions for v in final.finished) > 0
        assert any(v.state is RequestState.PREEMPTED for s in d.history() for v in s.active)
        assert all(v.state is RequestState.FINISHED for v in final.finished)
    finally:
        d.stop()


def test_pause_single_step_resume(driver: Driver) -> None:
    driver.send(Pause())
    add(driver, "a", max_tokens=10)
    paused = wait_for(driver, lambda s: s.engine_state is EngineState.PAUSED and s.active)
    step = paused.step
    assert paused.active[0].state is RequestState.PENDING
    driver.send(SingleStep())
    after = wait_for(driver, lambda s: s.step == step + 1)
    assert after.active[0].state is not RequestState.PENDING
    assert went_round(driver).step == step + 1  # one step, and no other since
    assert driver.latest().step == step + 1
    driver.send(Resume())
    wait_for(driver, lambda s: len(s.finished) == 1)


def test_abort_pending_and_running(driver: Driver) -> None:
    driver.send(Pause())
    add(driver, "pend", max_tokens=50)
    add(driver, "run", max_tokens=50)
    wait_for(driver, lambda s: len(s.active) == 2)
    driver.send(Abort("pend"))
    driver.send(SingleStep())
    driver.send(SingleStep())
    wait_for(driver, lambda s: s.step >= 2)
    driver.send(Abort("run"))
    driver.send(Abort("never-existed"))
    final = wait_for(driver, lambda s: len(s.finished) == 2)
    assert {v.request_id: v.state for v in final.finished} == {
        "pend": RequestState.ABORTED,
        "run": RequestState.ABORTED,
    }
    driver.send(Abort("run"))  # aborting a finished request is harmless
    driver.send(Resume())
    add(driver, "later", max_tokens=3)
    wait_for(driver, lambda s: len(s.finished) == 3 and all_done(s))


def test_rejections_keep_others_running(driver: Driver) -> None:
    add(driver, "ok", max_tokens=4)
    add(driver, "bad-t", temperature=-1.0)
    add(driver, "empty", "")
    add(driver, "ok", max_tokens=4)  # duplicate id
    final = wait_for(driver, lambda s: len(s.finished) == 4 and all_done(s))
    by_state = {(v.request_id, v.state) for v in final.finished}
    assert ("ok", RequestState.FINISHED) in by_state
    rejected = {v.request_id: v.error for v in final.finished if v.state is RequestState.REJECTED}
    assert "temperature must be non-negative" in (rejected["bad-t"] or "")
    assert "cannot be empty" in (rejected["empty"] or "")
    assert "duplicate" in (rejected["ok"] or "")


def test_n2_keeps_both_completions(driver: Driver) -> None:
    add(driver, "two", n=2, temperature=0.8, max_tokens=6, seed=1)
    final = wait_for(driver, lambda s: len(s.finished) == 1)
    view = final.finished[0]
    assert [c.index for c in view.completions] == [0, 1]
    assert all(len(c.token_ids) == 6 and c.finish_reason == "length" for c in view.completions)


def test_snapshots_are_immutable_views(driver: Driver) -> None:
    add(driver, "g", max_tokens=8, temperature=0.0, logprobs=1)
    wait_for(driver, lambda s: len(s.finished) == 1)
    mid = next(s for s in driver.history() if any(v.output_tokens >= 2 for v in s.active))
    tokens_then = list(mid.active[0].completions[0].token_ids)
    # The request went on to 8 tokens, but the old snapshot still shows what it had then.
    assert len(tokens_then) < 8
    assert (
        list(mid.active[0].completions[0].token_ids)
        == list(driver.latest().finished[0].completions[0].token_ids)[: len(tokens_then)]
    )
    assert mid.active[0].completions[0].logprobs is not None
    assert len(mid.active[0].completions[0].logprobs) == len(tokens_then)


class _Boom(FakeEngine):
    def __init__(self, fail_add: str | None = None, fail_step_at: int | None = None) -> None:
        super().__init__()
        self.fail_add = fail_add
        self.fail_step_at = fail_step_at
        self.steps = 0

    def add_request(self, request_id: str, prompt: str, spec: SamplingSpec) -> None:
        if request_id == self.fail_add:
            raise RuntimeError("tokenizer exploded")
        super().add_request(request_id, prompt, spec)

    def step(self):  # type: ignore[no-untyped-def]
        self.steps += 1
        if self.steps == self.fail_step_at:
            raise RuntimeError("CUDA error: device-side assert triggered")
        return super().step()


def test_add_request_fault_rejects_only_that_request() -> None:
    d = make_driver(_Boom(fail_add="bad"))
    d.start()
    try:
        add(d, "bad")
        add(d, "good", max_tokens=3)
        final = wait_for(d, lambda s: len(s.finished) == 2 and all_done(s))
        states = {v.request_id: (v.state, v.error) for v in final.finished}
        assert states["bad"] == (RequestState.REJECTED, "RuntimeError: tokenizer exploded")
        assert states["good"][0] is RequestState.FINISHED
    finally:
        d.stop()


def test_step_fault_keeps_finished_results() -> None:
    d = make_driver(_Boom(fail_step_at=12))
    d.start()
    try:
        add(d, "quick", max_tokens=2)
        add(d, "slow", max_tokens=100)
        final = wait_for(d, lambda s: s.engine_state is EngineState.ERROR)
        assert "device-side assert" in final.phase
        assert [v.request_id for v in final.finished] == ["quick", "slow"]
        assert final.finished[0].state is RequestState.FINISHED
        slow = final.finished[1]  # in flight when the engine failed: it can never finish
        assert slow.state is RequestState.ABORTED and slow.error == final.phase
        assert 0 < slow.output_tokens < 100
        assert final.active == ()
        add(d, "after")
        after = wait_for(d, lambda s: len(s.finished) == 3)
        assert after.finished[2].state is RequestState.REJECTED
    finally:
        d.stop()
    assert not d.alive


def test_startup_failure_is_reported() -> None:
    def factory(phase):  # type: ignore[no-untyped-def]
        phase("loading weights")
        raise FileNotFoundError("no such model: /nope")

    d = Driver(factory)
    d.start()
    snap: StepSnapshot = wait_for(d, lambda s: s.engine_state is EngineState.ERROR)
    assert "no such model" in snap.phase
    d.stop()
    assert not d.alive


def test_stop_leaves_no_thread() -> None:
    before = set(threading.enumerate())
    d = make_driver()
    d.start()
    add(d, "x", max_tokens=1000)
    wait_for(d, lambda s: s.step > 3)
    d.stop(timeout=5)
    assert not d.alive
    assert set(threading.enumerate()) <= before
    assert d.latest().engine_state is EngineState.STOPPED


def test_stop_mid_run_ends_pending_and_running_requests_as_unfinished(tmp_path: Path) -> None:
    """Quit, a signal or a closed pipe while requests are still to go: none of them vanishes.
    Each reaches the sinks (the results file) as ``unfinished``, with its tokens so far."""
    results = tmp_path / "results.jsonl"
    d = make_driver(FakeEngine(max_num_seqs=2), sinks=[ResultsWriter(results)])
    d.start()
    add(d, "quick", max_tokens=2)
    for i in range(6):
        add(d, f"long{i}", max_tokens=1000)
    wait_for(d, lambda s: len(s.finished) == 1 and any(v.output_tokens > 3 for v in s.active))
    d.stop(timeout=5)
    assert not d.alive and d.unfinished == 6
    final = d.latest()
    assert final.engine_state is EngineState.STOPPED and final.active == ()
    assert [v.state for v in final.finished] == [RequestState.FINISHED] + [
        RequestState.UNFINISHED
    ] * 6
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert [(r["id"], r["state"]) for r in records] == [
        ("quick", "finished"),
        *((f"long{i}", "unfinished") for i in range(6)),
    ]
    running = [r for r in records if r["state"] == "unfinished" and r["completions"]]
    assert running and all(len(r["completions"][0]["token_ids"]) > 3 for r in running)
    assert all(r["error"] == "stepview stopped before the request finished" for r in records[1:])


def test_a_run_that_ends_with_nothing_to_go_has_none_unfinished(driver: Driver) -> None:
    add(driver, "one", max_tokens=2)
    wait_for(driver, lambda s: len(s.finished) == 1 and all_done(s))
    driver.stop()
    assert driver.unfinished == 0
    assert [v.state for v in driver.latest().finished] == [RequestState.FINISHED]


def test_the_driver_names_every_field_of_the_snapshots_it_publishes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The driver is where a snapshot's values come from, each from its own state, so it names
    every field (the insight's ``alerts`` are added after): a field added to StepSnapshot is
    then a decision in ``Publisher.publish``, not a default nobody set. Traces and replays copy
    the driver's snapshots whole (tests/trace/test_step_fields.py)."""
    d = make_driver()
    named: list[frozenset[str]] = []

    def recording(**values: object) -> StepSnapshot:
        named.append(frozenset(values))
        return StepSnapshot(**values)  # type: ignore[arg-type]

    monkeypatch.setattr("stepview.engine.driver.publishing.StepSnapshot", recording)
    d.start()
    try:
        add(d, "r1", max_tokens=2)
        wait_for(d, lambda s: len(s.finished) == 1 and s.engine_state is EngineState.IDLE)
    finally:
        d.stop()
    expected = frozenset(f.name for f in fields(StepSnapshot)) - {"alerts"}
    assert named
    for names in named:
        assert names == expected, f"Publisher.publish leaves out {sorted(expected - names)}"
