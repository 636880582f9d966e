"""A fleet's watches work one at a time, in a turn they share, and never wait holding it.

At 64 servers every watch on its own runnable thread left the fleet screen's thread 1/65 of
the interpreter lock: a key took 5-10 s to show. The fleet now gives every watch one turn
(:mod:`stepview.launch.fleet`): a driver holds it while it reads, applies and publishes a
step, a ``/metrics`` watch while it reads a page into figures, and neither while it waits (for
its pace, a command, the server's answer), so at most one watch competes with the screen.
These tests watch where the turn is held, on real sockets, with no timing in an assertion.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stepview.engine.driver.loop import Driver
from stepview.engine.watch.api.server_api import ServerApi
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.engine.watch.link.backlog import ReadPace
from stepview.engine.watch.metrics import metrics_watch
from stepview.engine.watch.metrics.metrics_page import MetricsPage, read_page
from stepview.engine.watch.metrics.metrics_watch import MetricsWatch
from stepview.model.address import plugin_records
from stepview.model.engine_api import StepResult
from stepview.model.snapshot import StepSnapshot
from tests.engine.watch.attach_helpers import Server, ipc_address, record, request
from tests.engine.watch.fake_metrics import FakeMetrics, capture
from tests.helpers import wait_for


class Turn:
    """The fleet's turn (a re-entrant lock), saying who holds it."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.holder: int | None = None
        self.depth = 0

    def __enter__(self) -> None:
        self._lock.acquire()
        self.depth += 1
        self.holder = threading.get_ident()

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if not self.depth:
            self.holder = None
        self._lock.release()

    def mine(self) -> bool:
        return self.holder == threading.get_ident()


class Observed(AttachedEngine):
    """A fleet's plug-in watch that notes, at each call, whether its thread held the turn."""

    def __init__(self, address: str, turn: Turn) -> None:
        super().__init__(plugin_records(address), pace=ReadPace(every=0.05), turn=turn)
        self.turn = turn
        self.waits: list[bool] = []  # the pace's waits
        self.reads: list[bool] = []  # the sockets read
        self.steps: list[bool] = []
        observed = self

        class Closed(threading.Event):
            def wait(self, timeout: float | None = None) -> bool:
                observed.waits.append(turn.mine())
                return super().wait(timeout)

        self._closed = Closed()

    def _receive(self) -> None:
        self.reads.append(self.turn.mine())
        super()._receive()

    def step(self) -> StepResult:
        self.steps.append(self.turn.mine())
        return super().step()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[Server]]:
    started = [Server(ipc_address(tmp_path, f"s{i}.sock")) for i in range(2)]
    yield started
    for server in started:
        server.kill()


def generated(tokens: int) -> Callable[[StepSnapshot], bool]:
    return lambda snapshot: snapshot.total_generated == tokens


def test_the_drivers_of_a_fleet_step_in_its_turn_and_wait_out_of_it(servers: list[Server]) -> None:
    turn = Turn()
    engines: list[Observed] = []

    def build(address: str) -> Driver:
        def factory(phase: object) -> Observed:
            engine = Observed(address, turn)
            engines.append(engine)
            return engine

        return Driver(factory, read_only="no --api", turn=turn)

    drivers = [build(server.address) for server in servers]
    for driver in drivers:
        driver.start()
    try:
        for server in servers:
            server.wait_subscribed()
        for step in (1, 2, 3):
            one = request("r-0123abcd", outputs=step, new=[step], intro=step == 1)
            for server in servers:
                server.send(record(step, one, full=step == 1))
            for driver in drivers:
                wait_for(driver, generated(step), timeout=10)
    finally:
        for driver in drivers:
            driver.stop()
    for engine in engines:
        assert engine.steps and all(engine.steps)  # every step in the turn
        assert engine.reads and all(engine.reads)  # and every read of the sockets
        assert engine.waits and not any(engine.waits)  # the pace waited for out of it
    assert turn.holder is None


def test_a_metrics_watch_reads_its_page_in_the_turn_and_asks_out_of_it(
    fake_metrics: FakeMetrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    turn = Turn()
    api = ServerApi(fake_metrics.url)
    asked: list[bool] = []
    read: list[bool] = []
    get_text = api.get_text

    def asking(path: str, timeout: float) -> str:
        asked.append(turn.mine())
        return get_text(path, timeout)

    def reading(text: str) -> MetricsPage:
        read.append(turn.mine())
        return read_page(text)

    monkeypatch.setattr(api, "get_text", asking)
    monkeypatch.setattr(metrics_watch, "read_page", reading)
    watch = MetricsWatch(api, turn=turn)
    fake_metrics.page = capture("busy")
    busy = watch.scrape()
    assert (busy.counters.running, busy.counters.waiting) == (40, 0)  # the same figures
    assert asked and not any(asked)
    assert read == [True]
    assert turn.holder is None
