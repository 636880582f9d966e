"""The driver on an attached server: the same snapshots as a live run, a held view on pause.

A real :class:`Driver` thread runs an :class:`AttachedEngine` subscribed to a
:class:`Server` that tests make publish records; everything is read from ``latest()`` as the
UI reads it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stepview.engine.driver.loop import Driver
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.engine.watch.link.watched_core import LEFT
from stepview.model.address import plugin_records
from stepview.model.commands import AddRequest, Pause, Resume, SingleStep
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState
from tests.engine.watch.attach_helpers import WAITING, Server, record, request, wait_until
from tests.helpers import wait_for, went_round

S = RequestState


@pytest.fixture
def attached() -> list[AttachedEngine]:
    """The engine the driver builds, once it has."""
    return []


@pytest.fixture
def driver(server: Server, attached: list[AttachedEngine]) -> Iterator[Driver]:
    def build(phase: object) -> AttachedEngine:
        engine = AttachedEngine(plugin_records(server.address))
        attached.append(engine)
        return engine

    d = Driver(build, read_only="no --api")
    d.start()
    server.wait_subscribed()
    yield d
    d.stop()


def test_a_watched_server_fills_the_panes_step_by_step(server: Server, driver: Driver) -> None:
    assert driver.accepts_requests is False and driver.read_only == "no --api"
    snap = wait_for(driver, lambda s: s.engine_state is EngineState.IDLE, timeout=5)
    assert snap.info.model == f"vLLM server at {server.address}"
    server.send(
        record(1, request("a-0123abcd", outputs=1, new=[3]), request("b-0123abcd", WAITING)),
        record(2, request("b-0123abcd", WAITING, intro=False), finished=["a-0123abcd"]),
    )
    snap = wait_for(driver, lambda s: s.step == 2, timeout=5)
    assert snap.engine_state is EngineState.RUNNING
    assert [(v.request_id, v.state) for v in snap.active] == [("b", S.WAITING)]
    (done,) = snap.finished
    assert (done.request_id, done.completions[0].finish_reason) == ("a", LEFT)
    assert snap.step_time == pytest.approx(0.01)  # the server's step, not the read
    assert (snap.counters.running, snap.counters.waiting) == (0, 1)
    assert snap.info.max_num_seqs == 32
    server.send(record(3, idle=True, finished=["b-0123abcd"]))
    snap = wait_for(driver, lambda s: s.step == 3 and s.engine_state is EngineState.IDLE, 5)
    assert [v.request_id for v in snap.finished] == ["a", "b"]
    assert snap.total_generated == 1


def test_adding_without_api_is_rejected_with_the_reason(driver: Driver) -> None:
    wait_for(driver, lambda s: s.engine_state is EngineState.IDLE, timeout=5)
    driver.send(AddRequest("u1", "hi", SamplingSpec()))
    snap = wait_for(driver, lambda s: bool(s.finished), timeout=5)
    assert snap.finished[0].state is S.REJECTED
    assert "without --api" in (snap.finished[0].error or "")


def test_pause_holds_the_view_while_the_server_runs_on(
    server: Server, driver: Driver, attached: list[AttachedEngine]
) -> None:
    wait_for(driver, lambda s: s.engine_state is EngineState.IDLE, timeout=5)
    driver.send(Pause())
    wait_for(driver, lambda s: s.engine_state is EngineState.PAUSED, timeout=5)
    server.send(*(record(i, request("a-0123abcd", outputs=i, new=[i])) for i in range(1, 4)))
    (engine,) = attached
    wait_until(lambda: len(engine._backlog) == 3)  # the paused driver received all three ...
    snap = went_round(driver)  # ... and went round since, reading none of them
    assert snap.step == 0 and snap.active == ()
    assert driver.latest().step == 0 and driver.latest().active == ()
    driver.send(SingleStep())
    snap = wait_for(driver, lambda s: s.step == 1, timeout=5)
    assert snap.engine_state is EngineState.PAUSED
    assert list(snap.active[0].completions[0].token_ids) == [1]
    # Held, not lost: the records kept coming and are read on resume.
    driver.send(Resume())
    snap = wait_for(driver, lambda s: s.step == 3, timeout=5)
    assert list(snap.active[0].completions[0].token_ids) == [1, 2, 3]


def test_a_lost_server_shows_as_disconnected_and_quitting_leaves_it_alone(
    server: Server, driver: Driver
) -> None:
    server.send(record(1, request("a-0123abcd", outputs=1, new=[3])))
    wait_for(driver, lambda s: s.step == 1, timeout=5)
    server.kill()
    snap = wait_for(driver, lambda s: s.engine_state is EngineState.DISCONNECTED, timeout=10)
    assert f"DISCONNECTED from {server.address}" in snap.phase
    assert [(v.request_id, v.state) for v in snap.active] == [("a", S.DECODING)]
    server.restart()
    server.wait_subscribed()
    server.send(record(2, request("a-0123abcd", outputs=2, new=[3, 4])))
    snap = wait_for(driver, lambda s: s.step == 2, timeout=10)
    assert snap.engine_state is EngineState.RUNNING and snap.phase == ""
    driver.stop()
    publisher = server.publisher
    assert publisher is not None
    wait_until(lambda: not publisher.wanted())  # stepview's subscription is gone, nothing else
    assert driver.latest().engine_state is EngineState.STOPPED
