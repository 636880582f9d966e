"""A driver whose engine never gives its thread back: abandoning the run from another thread.

The engine here is the fake with a step (or a start-up) that blocks until the test lets it
go, as a hung kernel or a stopped engine-core process would keep it. The run's end must be
recorded all the same (every request in the results file, the rest ``unfinished``), and a
thread that comes back later must add nothing to files already closed.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from stepview.engine.driver.ledger import UNFINISHED_WHY
from stepview.engine.driver.loop import Driver
from stepview.files.results_file import ResultsWriter
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState
from stepview.testing.fake_engine import FakeEngine
from tests.helpers import wait_for
from tests.reliability.faults import FaultyEngine, driver_for


def saved(path: Path) -> dict[str, dict[str, object]]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_abandoning_a_driver_stuck_in_a_step_records_every_request(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    engine = FaultyEngine(block_step_at=6)
    driver = driver_for(engine, sinks=(ResultsWriter(results),))
    driver.start()
    try:
        driver.send(AddRequest("quick", "hello", SamplingSpec(max_tokens=2)))
        driver.send(AddRequest("long", "hello", SamplingSpec(max_tokens=100)))
        assert engine.blocking.wait(10)
        driver.stop(0.2)
        assert driver.alive  # the deadline passed with the thread in step()
        assert driver.abandon()
        assert driver.unfinished == 1
        assert driver.latest().engine_state is EngineState.STOPPED
        records = saved(results)
        assert records["quick"]["state"] == "finished"
        assert records["long"]["state"] == "unfinished"
        assert records["long"]["error"] == UNFINISHED_WHY
        assert 0 < len(records["long"]["completions"][0]["token_ids"]) < 100  # type: ignore[index]
        before = results.read_text()
        last = driver.latest()
    finally:
        engine.released.set()
    driver.join(5)
    assert not driver.alive  # back from the step, it only shut the engine down
    assert results.read_text() == before
    assert driver.latest() is last
    assert engine.shut_down
    assert driver.abandon()  # nothing left to do: the end is recorded


def test_abandoning_a_start_up_that_hangs_keeps_the_requests_sent_meanwhile(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results.jsonl"
    building = threading.Event()
    release = threading.Event()
    engine = FakeEngine()

    def factory(phase: object) -> FakeEngine:
        building.set()
        release.wait(30)
        return engine

    driver = Driver(factory, sinks=(ResultsWriter(results),))
    driver.send(AddRequest("early", "hello", SamplingSpec(max_tokens=3)))
    driver.start()
    try:
        assert building.wait(10)
        driver.stop(0.1)
        assert driver.abandon()
        assert driver.unfinished == 1
        assert saved(results)["early"]["state"] == "unfinished"
    finally:
        release.set()
    driver.join(5)
    assert not driver.alive
    assert engine.shut_down  # built after all: shut down, never stepped
    assert list(saved(results)) == ["early"]


def test_a_driver_that_stopped_in_time_has_nothing_to_abandon(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    driver = Driver(lambda phase: FakeEngine(), sinks=(ResultsWriter(results),))
    driver.start()
    driver.send(AddRequest("r", "hello", SamplingSpec(max_tokens=2)))
    wait_for(driver, lambda s: any(v.state is RequestState.FINISHED for v in s.finished))
    driver.stop(5)
    assert not driver.alive
    text = results.read_text()
    assert driver.abandon()
    assert results.read_text() == text
