"""Running the driver on real vLLM (demo model, CPU), and the checks every such run passes.

tests/driver checks the driver's rules on a fake engine in milliseconds; the fake is only
worth something if real vLLM behaves the way it pretends to. So every claim the UI makes
from snapshots is checked against what vLLM actually did (test_driver_real_default.py and
test_driver_real_scheduling.py): states only move forward except through a preemption vLLM
recorded, the counters vLLM reports agree with the requests the snapshot shows, every
finished request has its timings in order (:func:`check_run`).

Only one vLLM engine may be alive per process (see conftest), and every driver owns its
engine and shuts it down on stop. So a test module that builds drivers imports
:func:`_no_pool_engine`, which releases the pool's engine once for that module, and its
drivers are strictly sequential: one class-scoped driver per group of tests with the same
engine settings, the others built and stopped inside their test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from stepview.engine.driver.loop import Driver, PhaseCallback
from stepview.engine.own.tiny_model import tiny_engine_args
from stepview.engine.own.vllm_engine import VllmEngine
from stepview.model.commands import AddRequest
from stepview.model.engine_api import Engine
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState, RequestView, StepSnapshot
from tests.helpers import all_done, wait_for
from tests.vllm_engines import EnginePool

S = RequestState
# Every snapshot of a run is kept: the checks below walk the whole history.
HISTORY = 1_000_000
# Generous: a busy CI machine with 2 cores; a healthy run takes a few seconds.
RUN_TIMEOUT = 90.0
# The order a request moves through; PREEMPTED sits where vLLM puts it back (the waiting queue).
_RANK = {
    S.PENDING: 0,
    S.WAITING: 1,
    S.PREEMPTED: 2,
    S.PREFILLING: 3,
    S.DECODING: 4,
    S.FINISHED: 5,
    S.ABORTED: 5,
    S.REJECTED: 5,
}
_QUEUED = frozenset({S.WAITING, S.PREEMPTED})

# ~360 tokens with the demo tokenizer: several 64-token prefill chunks, or two of them fill
# the tiny KV cache below.
LONG_PROMPT = "def foo(x): return x + " * 40


@pytest.fixture(scope="module", autouse=True)
def _no_pool_engine(engines: EnginePool) -> None:
    """Shut the pool's engine down before any driver here builds its own (one per process).

    Module scope, so it runs before the class-scoped drivers are set up.
    """
    engines.release()


def _factory(
    built: list[VllmEngine] | None = None, **overrides: Any
) -> Callable[[PhaseCallback], Engine]:
    """What stepview's CLI does: a VllmEngine over the demo model, built on the driver thread.

    ``built`` receives the engine, for tests that check what the driver did to it.
    """

    def build(on_phase: PhaseCallback) -> Engine:
        engine = VllmEngine.create(
            tiny_engine_args(**overrides), demo_model=True, model_label="demo", on_phase=on_phase
        )
        if built is not None:
            built.append(engine)
        return engine

    return build


def _start(
    *, admit_per_step: int = 0, built: list[VllmEngine] | None = None, **overrides: Any
) -> Driver:
    driver = Driver(
        _factory(built, **overrides), history_size=HISTORY, admit_per_step=admit_per_step
    )
    driver.start()
    ready = wait_for(driver, lambda s: s.engine_state is not EngineState.STARTING, RUN_TIMEOUT)
    assert ready.engine_state is EngineState.IDLE, ready.phase
    return driver


def _stop(driver: Driver) -> None:
    driver.stop(timeout=60)
    assert not driver.alive, "driver thread did not end"
    assert driver.latest().engine_state is EngineState.STOPPED, driver.error


@contextmanager
def _running(**overrides: Any) -> Iterator[Driver]:
    driver = _start(**overrides)
    try:
        yield driver
    finally:
        _stop(driver)


def _add(driver: Driver, request_id: str, prompt: str, **spec: Any) -> None:
    driver.send(AddRequest(request_id, prompt, SamplingSpec(**spec)))


def _wait_done(driver: Driver, ids: Sequence[str]) -> StepSnapshot:
    """Wait until every id reached a final state and the engine has nothing left."""
    wanted = set(ids)

    def done(s: StepSnapshot) -> bool:
        return wanted <= {v.request_id for v in s.finished} and all_done(s)

    return wait_for(driver, done, RUN_TIMEOUT)


def _final(snapshot: StepSnapshot) -> dict[str, RequestView]:
    return {v.request_id: v for v in snapshot.finished}


def _live_samples(view: RequestView) -> int:
    """Sequences this request holds in vLLM's scheduler: one per sample not finished yet.

    vLLM's counters count each of the ``n`` samples of a request (they are separate
    scheduler requests); the snapshot shows the request once.
    """
    return view.spec.n - sum(c.finish_reason is not None for c in view.completions)


def check_lifecycles(history: Sequence[StepSnapshot]) -> dict[str, list[RequestState]]:
    """Walk every snapshot; assert each request only moves forward; return each one's path.

    Forward is PENDING -> WAITING -> PREFILLING -> DECODING -> final, skipping allowed (a
    request can be admitted and prefilled within one step). The only way back is a
    preemption, which must be visible where it happens: state PREEMPTED with a higher
    ``num_preemptions``. Prefill progress falls only there, and a final state is final.
    """
    last: dict[str, RequestView] = {}
    paths: dict[str, list[RequestState]] = {}
    for snap in history:
        ids = [v.request_id for v in snap.active] + [v.request_id for v in snap.finished]
        assert len(ids) == len(set(ids)), f"step {snap.step}: a request shown twice"
        for view in (*snap.active, *snap.finished):
            rid = view.request_id
            prev = last.get(rid)
            last[rid] = view
            path = paths.setdefault(rid, [])
            if not path or path[-1] is not view.state:
                path.append(view.state)
            if prev is None or prev is view:
                continue
            where = f"{rid} at step {snap.step}: {prev.state} -> {view.state}"
            if prev.state.done:
                assert view.state is prev.state, where
                continue
            assert view.num_preemptions >= prev.num_preemptions, where
            preempted_here = view.num_preemptions > prev.num_preemptions
            if preempted_here:
                assert view.state is S.PREEMPTED, where
            if view.state is S.PREEMPTED and prev.state is not S.PREEMPTED:
                assert preempted_here, f"{where} without a recorded preemption"
            if _RANK[view.state] < _RANK[prev.state]:
                assert view.state is S.PREEMPTED and preempted_here, f"{where} (backwards)"
            if view.computed_prompt_tokens < prev.computed_prompt_tokens:
                assert preempted_here, f"{where}: prefill progress fell without a preemption"
            assert view.computed_prompt_tokens <= view.prompt_tokens, where
    for rid, view in last.items():
        assert view.state.done, f"{rid} never finished ({view.state})"
        if view.state is S.FINISHED and view.output_tokens > view.spec.n:
            # It produced tokens over at least two steps: one snapshot showed it decoding.
            assert S.DECODING in paths[rid], (rid, paths[rid])
    return paths


def check_counters(history: Sequence[StepSnapshot]) -> int:
    """vLLM's running/waiting counts agree with the states the same snapshot shows.

    Checked on the snapshot published right after each step (between steps a command may
    change the requests while the counters still describe the last step). Returns how many
    snapshots were checked.
    """
    checked = 0
    previous_step = 0
    for snap in history:
        if snap.step != previous_step:
            running = sum(_live_samples(v) for v in snap.active if v.state.pane == "running")
            queued = sum(_live_samples(v) for v in snap.active if v.state in _QUEUED)
            counters = snap.counters
            assert (counters.running, counters.waiting) == (running, queued), (
                f"step {snap.step}: counters {counters} vs "
                f"{[(v.request_id, v.state.value) for v in snap.active]}"
            )
            checked += 1
        previous_step = snap.step
    return checked


def check_timings(finished: Sequence[RequestView]) -> None:
    """Every finished request has all its timings, in order."""
    for view in finished:
        if view.state is not S.FINISHED:
            continue
        t = view.timings
        assert t.scheduled is not None and t.first_token is not None, view
        assert t.finished is not None
        assert t.arrival <= t.scheduled <= t.first_token <= t.finished, (view.request_id, t)
        assert view.computed_prompt_tokens == view.prompt_tokens > 0, view.request_id


def check_run(history: Sequence[StepSnapshot]) -> dict[str, list[RequestState]]:
    paths = check_lifecycles(history)
    assert check_counters(history) > 0
    check_timings(history[-1].finished)
    return paths


def _at_step(step: int) -> Callable[[StepSnapshot], bool]:
    return lambda s: s.step == step
