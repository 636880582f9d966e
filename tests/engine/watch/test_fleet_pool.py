"""A fleet's watches on a bounded pool: 300 servers, a quarter down or hung, a handful of threads.

Before the pool every member had a thread of its own (a fleet of 400 held 402), and a server
that accepted a connection and never answered held one for its timeout. Here 300 simulated
servers (``/metrics`` pages served by one asyncio thread, plug-in publishers stepped by one
thread) are watched by a :class:`FleetPool` of 4 workers: the watch adds the pool's threads
and no more, whatever is down or hung; every live server's row moves on; a server down is
retried with a back-off; a server's full view (its pace 0) reads each step, and a command
to a pooled member takes effect at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stepview.engine.driver.loop import Driver
from stepview.engine.watch.api.server_api import ApiError, ServerApi
from stepview.engine.watch.fleet.fleet_pool import FleetPool, PooledSource
from stepview.engine.watch.fleet.pooled_driver import LOOK_MAX_S, PooledDriver
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.engine.watch.link.backlog import (
    FLEET_READ_MAX_S,
    FLEET_READ_S,
    FleetPaces,
    ReadPace,
)
from stepview.engine.watch.metrics import metrics_source
from stepview.engine.watch.metrics.metrics_source import RETRY_MAX_S, MetricsSource
from stepview.engine.watch.metrics.metrics_watch import MetricsWatch
from stepview.model.address import plugin_records
from stepview.model.commands import Pause
from stepview.model.engine_api import Engine, LinkState
from stepview.model.snapshot import EngineState
from tests.engine.watch.attach_helpers import Server, ipc_address, record, request
from tests.engine.watch.fake_metrics import MODEL, capture
from tests.helpers import wait_for

LIVE_PAGES, DOWN_PAGES, HUNG_PAGES = 100, 25, 25
LIVE_PLUGINS, DOWN_PLUGINS = 120, 30


class PageFarm:
    """Many ``/metrics`` servers on one asyncio thread (a real page each), and as many
    listening ports that accept a connection and never answer (a hung server)."""

    def __init__(self, pages: int, hung: int) -> None:
        self.page = capture("busy").encode()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.urls = [self._call(self._serve()) for _ in range(pages)]
        self.hung: list[socket.socket] = []
        for _ in range(hung):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sock.listen(64)  # the kernel completes the connections; nobody reads them
            self.hung.append(sock)

    def _call(self, coroutine: object) -> str:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()  # type: ignore[arg-type]

    async def _serve(self) -> str:
        server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            line = (await reader.readuntil(b"\r\n\r\n")).split(b" ", 2)[1]
            body = self.page
            if line == b"/v1/models":
                body = b'{"data": [{"id": "%s", "max_model_len": 512}]}' % MODEL.encode()
            elif line == b"/version":
                body = b'{"version": "0.32.0"}'
            writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            await writer.drain()
        writer.close()

    def close(self) -> None:
        for sock in self.hung:
            sock.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def refused_url() -> str:
    """An address where nothing listens (the port just given back)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


class Publishing:
    """The live plug-in servers, stepped by one thread: one running request, a token a step."""

    def __init__(self, servers: list[Server]) -> None:
        self.servers = servers
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for step in itertools.count(1):
            if self._done.wait(0.02):
                return
            one = request("r-0123abcd", outputs=step, new=[step])
            for server in self.servers:
                server.send(record(step, one))

    def stop(self) -> None:
        self._done.set()
        self._thread.join(5)
        for server in self.servers:
            server.kill()


@pytest.fixture
def farm() -> Iterator[PageFarm]:
    started = PageFarm(LIVE_PAGES, HUNG_PAGES)
    yield started
    started.close()


@pytest.fixture
def publishing(tmp_path: Path) -> Iterator[Publishing]:
    servers = [Server(ipc_address(tmp_path, f"p{i}.sock")) for i in range(LIVE_PLUGINS)]
    started = Publishing(servers)
    yield started
    started.stop()


def metrics_member(url: str, pool: FleetPool) -> PooledSource:
    watch = MetricsWatch(ServerApi(url), window=10.0)
    return PooledSource(MetricsSource(watch, interval=0.2, history=4), pool)


def plugin_member(address: str, pool: FleetPool, pace: ReadPace) -> PooledSource:
    context = pool.zmq_context

    def factory(phase: object) -> Engine:
        records = plugin_records(address)
        return AttachedEngine(records, pace=pace, context=context)

    return PooledSource(PooledDriver(Driver(factory, read_only="no --api"), pace), pool)


def test_a_fleet_of_300_runs_on_the_pools_threads_and_every_live_row_moves(
    farm: PageFarm,
    publishing: Publishing,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(metrics_source, "SCRAPE_TIMEOUT_S", 0.5)  # a hung page's read, bounded
    before = threading.active_count()
    pool = FleetPool(workers=4)
    pool.start()
    paces = [ReadPace(every=0.05, scheduled=True) for _ in range(LIVE_PLUGINS + DOWN_PLUGINS)]
    live_plugins = [s.address for s in publishing.servers]
    down_plugins = [ipc_address(tmp_path, f"down{i}.sock") for i in range(DOWN_PLUGINS)]
    hung = [f"http://127.0.0.1:{s.getsockname()[1]}" for s in farm.hung]
    down = [refused_url() for _ in range(DOWN_PAGES)]
    live = [metrics_member(url, pool) for url in farm.urls] + [
        plugin_member(a, pool, p) for a, p in zip(live_plugins, paces, strict=False)
    ]
    dead = [metrics_member(url, pool) for url in hung + down] + [
        plugin_member(a, pool, p) for a, p in zip(down_plugins, paces[LIVE_PLUGINS:], strict=True)
    ]
    members = live + dead
    assert len(members) == 300
    threads = 0
    try:
        for member in members:
            member.start()
        for member in live:
            threads = max(threads, threading.active_count() - before)
            wait_for(member, lambda s: s.step >= 3 and s.engine_state is not EngineState.ERROR)
        for member in dead:
            threads = max(threads, threading.active_count() - before)
            seen = member.latest()
            assert seen.engine_state in (EngineState.STARTING, EngineState.DISCONNECTED)
            assert seen.step == 0
        assert threads <= pool.workers + 1  # the workers and the loop, nothing per server

        # A server's full view: its pace 0 reads each record, and a command comes at once.
        opened, pace = live[LIVE_PAGES], paces[0]
        pace.every = 0.0
        step = opened.latest().step
        wait_for(opened, lambda s: s.step >= step + 5)
        opened.send(Pause())
        wait_for(opened, lambda s: s.engine_state is EngineState.PAUSED)
    finally:
        pool.halt_all()
        for member in members:
            member.stop(5.0)
        pool.stop()
    assert not any(member.alive for member in members)


def test_a_page_that_cannot_be_read_is_read_again_later_and_later() -> None:
    source = MetricsSource(MetricsWatch(ServerApi(refused_url())), interval=1.0, history=2)
    lost = (0.0, ApiError("refused"))
    delays = [source.work(lost) for _ in range(6)]
    assert delays == [2.0, 4.0, 8.0, 16.0, RETRY_MAX_S, RETRY_MAX_S]
    source.stop()
    assert source.work(lost) is None


class Unreached:
    """A driver's link that never comes up, for the back-off of a plug-in server down."""

    def __init__(self) -> None:
        self.turns = 0

    def open(self) -> None:
        pass

    def advance(self) -> float:
        self.turns += 1
        return 0.05

    @property
    def link(self) -> LinkState:
        return LinkState(EngineState.DISCONNECTED)


class Reached(Unreached):
    @property
    def link(self) -> LinkState:
        return LinkState(EngineState.RUNNING)


def test_a_large_fleet_reads_each_plugin_server_less_often() -> None:
    """Four reads a second of each of 750 plug-in servers were more than a core: past ~60
    servers the fleet's pace grows with it, up to a read a second."""
    paces = FleetPaces()
    for port in range(60):
        paces.of(f"tcp://127.0.0.1:{port}")
    assert paces.fleet.every == FLEET_READ_S
    for port in range(60, 1000):
        paces.of(f"tcp://127.0.0.1:{port}")
    assert paces.fleet.every == FLEET_READ_MAX_S
    assert paces.each["tcp://127.0.0.1:0"].every == FLEET_READ_S  # each one's, unchanged


def test_a_pooled_driver_reads_at_the_fleets_pace_and_each_step_while_its_view_is_open() -> None:
    own, fleet = ReadPace(every=FLEET_READ_S), ReadPace(every=FLEET_READ_MAX_S)
    unit = PooledDriver(Reached(), own, fleet)  # type: ignore[arg-type]
    assert unit.work(None) == FLEET_READ_MAX_S
    own.every = 0.0  # its full view: each step, whatever the fleet's size
    assert unit.work(None) == 0.05


def test_a_paced_turn_that_stepped_comes_back_at_its_pace_not_at_once(tmp_path: Path) -> None:
    """A turn that stepped came back at once ("more to read"), found what had come meanwhile,
    stepped again, and so on: at a thousand servers each was read as often as the workers
    could (900 turns a second for 750 servers whose pace asked for 750), never at its pace.
    Now a turn comes back at once only when it read more than it reported."""
    server = Server(ipc_address(tmp_path))
    publishing = Publishing([server])  # a record every 20 ms
    pace = ReadPace(every=0.25, scheduled=True)

    def factory(phase: object) -> Engine:
        return AttachedEngine(plugin_records(server.address), pace=pace)

    driver = Driver(factory, read_only="no --api")
    unit = PooledDriver(driver, pace)
    try:
        paced, deadline = 0, time.monotonic() + 60
        while paced < 3:  # three steps, each with what came in its pace (a dozen records)
            assert time.monotonic() < deadline, "it never stepped at its pace"
            before = driver.latest().step
            delay = unit.work(None)
            assert delay is not None
            if delay == 0:  # it read more than it reported: the next turn reports it
                step = driver.latest().step
                unit.work(None)
                assert driver.latest().step > step
            elif driver.latest().step > before:
                assert delay == pace.every
                paced += 1
            time.sleep(delay)  # the pool's wait for the member's next turn
    finally:
        publishing.stop()
        unit.end()


def test_a_plugin_server_not_reached_is_looked_at_less_and_less_often() -> None:
    driver = Unreached()
    unit = PooledDriver(driver, ReadPace(every=0.25))  # type: ignore[arg-type]
    delays = [unit.work(None) for _ in range(6)]
    assert delays == [0.5, 1.0, 2.0, LOOK_MAX_S, LOOK_MAX_S, LOOK_MAX_S]
    assert driver.turns == 6


class Counting:
    """A unit that counts its turns and asks for the next one ``delay`` s later; ``seen``
    is set at its ``enough``-th turn."""

    reads = False
    accepts_requests = False

    def __init__(self, delay: float, enough: int = 5) -> None:
        self.delay, self.enough = delay, enough
        self.turns = 0
        self.first = threading.Event()
        self.seen = threading.Event()
        self.stopped = False

    def latest(self) -> object:
        return None

    def history(self) -> tuple[()]:
        return ()

    def send(self, command: object) -> None:
        pass

    def stop(self, timeout: float = 5.0) -> None:
        self.stopped = True

    async def fetch(self) -> None:
        return None

    def work(self, fetched: object) -> float | None:
        if self.stopped:
            return None
        self.turns += 1
        self.first.set()
        if self.turns >= self.enough:
            self.seen.set()
        return self.delay

    def end(self) -> None:
        pass


def run_units(workers: int, *units: Counting) -> Iterator[list[PooledSource]]:
    pool = FleetPool(workers=workers)
    pool.start()
    sources = [PooledSource(unit, pool) for unit in units]  # type: ignore[arg-type]
    for source in sources:
        source.start()
    try:
        yield sources
    finally:
        pool.halt_all()
        for source in sources:
            source.stop(5.0)
        pool.stop()


def test_a_member_with_more_to_read_takes_its_turns_among_the_others() -> None:
    """A member catching up (the next unit at once, again and again) is behind those already
    due, never before them: with one worker, the others still get their turns."""
    catching_up, others = Counting(0.0), [Counting(0.01) for _ in range(3)]
    with contextlib.contextmanager(run_units)(1, catching_up, *others):
        for unit in others:
            assert unit.seen.wait(30)
    assert catching_up.turns > 0


def test_a_command_brings_a_members_next_unit_forward() -> None:
    """A member due in an hour works at once when sent a command (a full view's pause)."""
    idle = Counting(3600.0, enough=2)
    with contextlib.contextmanager(run_units)(2, idle) as sources:
        assert idle.first.wait(30)  # its first unit done: the next is an hour away
        sources[0].send(Pause())
        assert idle.seen.wait(30)


def test_every_member_is_taken_in_time_however_few_the_workers() -> None:
    """Members due at many different times, on two workers: each one's turns come (a leader
    times the earliest, the others wait for it to be taken)."""
    units = [Counting(0.001 * (i % 17)) for i in range(200)]
    with contextlib.contextmanager(run_units)(2, *units):
        for unit in units:
            assert unit.seen.wait(30)
