"""Pause and single step really stop an engine core that runs in its own process.

A core in its own process steps by itself while it has requests; stepview holds it with
vLLM's own pause (``pause_scheduler("keep")``). The core's own records, read by a second
subscriber, tell what the core did: nothing while paused, one step per single step, and
the driver shows every step the core made, no more and no fewer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from itertools import pairwise

import pytest

from stepview.engine.driver.loop import Driver, PhaseCallback
from stepview.engine.own.core_link import SubscribedLink
from stepview.engine.own.tiny_model import tiny_engine_args
from stepview.engine.own.vllm_engine import VllmEngine
from stepview.engine.records.channel import FactsSubscriber
from stepview.engine.records.facts import StepFacts
from stepview.model.commands import AddRequest, Pause, Resume, SingleStep
from stepview.model.engine_api import Engine
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState, StepSnapshot
from tests.helpers import all_done, wait_for, went_round
from tests.vllm_engines import EnginePool

pytestmark = pytest.mark.engine


def _steps(records: list[StepFacts], since: float = 0.0, until: float = float("inf")) -> int:
    """Core steps that scheduled something, among ``records`` captured in [since, until)
    (the core's wall clock, this machine's)."""
    return sum(1 for r in records if not r.idle and since <= r.time < until)


def _read_until(
    subscriber: FactsSubscriber,
    records: list[StepFacts],
    done: Callable[[list[StepFacts]], bool],
    timeout: float = 30.0,
) -> None:
    """Read the core's records into ``records`` until ``done(records)``."""
    deadline = time.monotonic() + timeout
    while not done(records):
        assert time.monotonic() < deadline, f"{len(records)} records, not there yet"
        records.extend(subscriber.poll(0.1))


def _caught_up(driver: Driver) -> StepSnapshot:
    """Once paused, the driver reads the steps the core made before it was held, one per
    loop: caught up when it went round twice at the same step."""
    previous = went_round(driver)
    while (latest := went_round(driver)).step != previous.step:
        previous = latest
    return latest


def test_pause_and_single_step_hold_a_core_in_its_own_process(
    engines: EnginePool, monkeypatch: pytest.MonkeyPatch
) -> None:
    engines.release()
    built: list[VllmEngine] = []
    # The test's own subscriber, connected when stepview's own link is: before the core
    # process starts, so its subscription is there before any step (a core sends records
    # only to the subscriptions it has read, as it steps).
    copies: list[FactsSubscriber] = []
    own_init = SubscribedLink.__init__

    def with_a_copy(link: SubscribedLink, address: str | None = None) -> None:
        own_init(link, address)
        copies.append(FactsSubscriber(link.address))

    monkeypatch.setattr(SubscribedLink, "__init__", with_a_copy)

    def build(on_phase: PhaseCallback) -> Engine:
        engine = VllmEngine.create(
            tiny_engine_args(),
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
        (subscriber,) = copies
        assert subscriber.address == engine.facts_address
        assert subscriber.wait_connected(10)
        records: list[StepFacts] = []
        for i in range(3):
            # Long enough that the core, which steps on its own, cannot finish before the
            # pause reaches it even when the test process is descheduled for a second.
            spec = SamplingSpec(temperature=0.0, max_tokens=400, ignore_eos=True)
            driver.send(AddRequest(f"h{i}", f"hold number {i}", spec))

        # Paused from the start: the driver went round with the requests and took no step,
        # and the core makes none either, however long it is held: the hold is what is
        # tested (its records' times say below that nothing came from it).
        assert went_round(driver).step == 0
        time.sleep(1.0)  # the hold under test: the window in which the core must not step

        # Each single step: the core makes one step, and the driver shows it.
        marks = []  # when each single step was asked for, then when the run was resumed
        for expected in (1, 2, 3):
            marks.append(time.time())
            driver.send(SingleStep())
            wait_for(driver, lambda s, n=expected: s.step >= n, 30)
            _read_until(subscriber, records, lambda r, n=expected: _steps(r) >= n)
            assert _steps(records) == driver.latest().step == expected
        marks.append(time.time())

        # Resumed, then paused mid-run: the core stops, the driver shows where it stopped.
        driver.send(Resume())
        wait_for(driver, lambda s: s.step >= 8, 30)
        driver.send(Pause())
        wait_for(driver, lambda s: s.engine_state is EngineState.PAUSED, 10)
        held_at = _caught_up(driver).step
        time.sleep(1.0)  # the hold under test: a held core makes no step, however long
        resumed_at = time.time()

        driver.send(Resume())
        done = wait_for(driver, lambda s: len(s.finished) == 3 and all_done(s), 60)
        assert all(v.state is RequestState.FINISHED for v in done.finished)
        assert held_at < done.step  # it had stopped before the requests were done
        # The core's idle record comes after its last step: then every record is here.
        last = done.step
        _read_until(subscriber, records, lambda r: bool(r) and r[-1].idle and _steps(r) >= last)
        assert _steps(records) == done.step  # every core step shown once
        # When the core stepped, by its own records: not before the first single step, once
        # per single step, and while held not once (the steps it made before being held are
        # the ones the driver showed at the pause).
        assert _steps(records, until=marks[0]) == 0
        assert [_steps(records, a, b) for a, b in pairwise(marks)] == [1] * 3
        assert _steps(records, until=resumed_at) == held_at
    finally:
        driver.stop(timeout=60)
