"""Pause and single step really stop an engine core that runs in its own process.

A core in its own process steps by itself while it has requests; stepview holds it with
vLLM's own pause (``pause_scheduler("keep")``). The core's own records, read by a second
subscriber, tell what the core did: nothing while paused, one step per single step, and
the driver shows every step the core made, no more and no fewer.
"""

from __future__ import annotations

import time

import pytest

from stepview.engine.driver.loop import Driver, PhaseCallback
from stepview.engine.own.tiny_model import demo_engine_args
from stepview.engine.own.vllm_engine import VllmEngine
from stepview.engine.records.channel import FactsSubscriber
from stepview.engine.records.facts import StepFacts
from stepview.model.commands import AddRequest, Pause, Resume, SingleStep
from stepview.model.engine_api import Engine
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState
from tests.helpers import all_done, wait_for
from tests.vllm_engines import EnginePool

pytestmark = pytest.mark.engine


def _stepped(subscriber: FactsSubscriber, records: list[StepFacts], wait: float) -> int:
    """Core steps that scheduled something, among the records read within ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        records.extend(subscriber.poll())
        time.sleep(0.01)
    return sum(1 for r in records if not r.idle)


def test_pause_and_single_step_hold_a_core_in_its_own_process(engines: EnginePool) -> None:
    engines.release()
    built: list[VllmEngine] = []

    def build(on_phase: PhaseCallback) -> Engine:
        engine = VllmEngine.create(
            demo_engine_args(),
            demo_model=True,
            model_label="demo",
            on_phase=on_phase,
            multiprocess=True,
        )
        built.append(engine)
        return engine

    driver = Driver(build, history_size=10_000, start_paused=True)
    driver.start()
    try:
        wait_for(driver, lambda s: s.engine_state is not EngineState.STARTING, 120)
        engine = built[0]
        assert engine.core_hold is not None  # in-process engines need none
        address = engine.facts_address
        assert address is not None
        subscriber = FactsSubscriber(address)
        records: list[StepFacts] = []
        _stepped(subscriber, records, 0.5)  # subscribed before anything runs
        for i in range(3):
            spec = SamplingSpec(temperature=0.0, max_tokens=48)
            driver.send(AddRequest(f"h{i}", f"hold number {i}", spec))

        # Paused from the start: the core makes no step at all, however long we wait.
        assert _stepped(subscriber, records, 1.5) == 0
        assert driver.latest().step == 0

        # Each single step: the core makes one step, and the driver shows it.
        for expected in (1, 2, 3):
            driver.send(SingleStep())
            wait_for(driver, lambda s, n=expected: s.step >= n, 30)
            core_steps = _stepped(subscriber, records, 0.7)
            assert core_steps == driver.latest().step == expected

        # Resumed, then paused mid-run: the core stops, the driver shows where it stopped.
        driver.send(Resume())
        wait_for(driver, lambda s: s.step >= 8, 30)
        driver.send(Pause())
        wait_for(driver, lambda s: s.engine_state is EngineState.PAUSED, 10)
        held_at = _stepped(subscriber, records, 1.0)
        assert _stepped(subscriber, records, 1.0) == held_at  # nothing while held
        assert wait_for(driver, lambda s: s.step == held_at, 5).step == held_at

        driver.send(Resume())
        done = wait_for(driver, lambda s: len(s.finished) == 3 and all_done(s), 60)
        assert all(v.state is RequestState.FINISHED for v in done.finished)
        assert held_at < done.step  # it had stopped before the requests were done
        assert _stepped(subscriber, records, 0.5) == done.step  # every core step shown once
    finally:
        driver.stop(timeout=60)
