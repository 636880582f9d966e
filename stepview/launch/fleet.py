"""``stepview --attach A --attach B …``: several servers watched at once, the fleet; or the
servers listed where they already are (``--attach prometheus://…``, a file_sd ``--attach-file``).

Each server gets the watch a single ``--attach`` would give it: a ``/metrics`` watch
(:class:`~stepview.engine.watch.metrics.metrics_source.MetricsSource`) for an ``http://``
address, the plug-in's records through a :class:`~stepview.engine.driver.loop.Driver` for a
``tcp://`` or ``ipc://`` one, all run by one pool, an event loop and a few workers
(:mod:`~stepview.engine.watch.fleet.fleet_pool`), not a thread each. They work one at a time
(``run_fleet``'s ``turn``). The fleet screen reads the
latest snapshot of each (:mod:`stepview.ui.fleet.fleet_app`); Enter shows one server's full
view on the same running source, Esc comes back. ``--headless`` prints, every
``--scrape-interval``, one JSON line per server (:func:`stepview.insight.fleet.fleet_record`,
its ``address`` and ``labels`` on each), and on stderr when a server is lost and back, until a
signal.

The servers are a :class:`~stepview.engine.watch.fleet.fleet_members.FleetMembers`: those given, and
those a discovery lists (``--attach prometheus://…``, an ``--attach-file`` in file_sd format),
followed while watching. A server that joins gets its watch started here (``_source``), one
that leaves has it stopped; headless, stderr says who joined and left, and when a listing
cannot be read. A fleet of one discovered server is still a fleet: its listing can grow.

The outputs a fleet takes (``--otlp-traces-endpoint``) are opened once for the run; each
plug-in server's driver gets its own sinks of them (``RunOutputs.sinks_for``, with the
insight that driver observes with), and they are closed, and say what they did, once, at
the end. A ``/metrics`` server has no requests to give them.

Nothing here imports vLLM: the servers run elsewhere.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from stepview.insight.fleet import FleetRow, fleet_record, fleet_row, mark_imbalance
from stepview.launch.attach import NO_API
from stepview.launch.attach_headless import LinkNotices
from stepview.launch.compose import run_driver, start_watch
from stepview.launch.exits import EXIT_BROKEN_PIPE, fail, notice, silence, stop_on_signals
from stepview.launch.outputs import RunOutputs, open_outputs, run_insight
from stepview.launch.runner import EXIT_WATCHDOG_S, arm_exit_watchdog
from stepview.model.address import MetricsUrl, PluginRecords
from stepview.model.engine_api import LinkState
from stepview.model.snapshot import StepSnapshot
from stepview.model.source import SnapshotSource
from stepview.model.targets import FILE_SD, Discovery, Labels, Member, Roster, Target
from stepview.run.spec import RunSpec

if TYPE_CHECKING:
    from stepview.engine.watch.api.api_key import ApiKey
    from stepview.engine.watch.fleet.fleet_members import Finder, FleetMembers
    from stepview.engine.watch.fleet.fleet_pool import FleetPool, Unit
    from stepview.engine.watch.link.backlog import FleetPaces

log = logging.getLogger(__name__)


def run_fleet(spec: RunSpec, log_path: Path) -> int:
    """Watch every server of ``spec.watch`` and those its discoveries list; the exit code."""
    from stepview.engine.records.curve import CurveKeyError, watch_keys
    from stepview.engine.watch.api.api_key import resolve_api_key
    from stepview.engine.watch.api.server_api import ServerApi
    from stepview.engine.watch.fleet.fleet_members import FleetMembers
    from stepview.engine.watch.fleet.fleet_pool import FleetPool, PooledSource
    from stepview.engine.watch.link.backlog import FleetPaces

    try:
        key = resolve_api_key(spec.watch.api_key)
        for server in spec.watch.servers:
            if isinstance(server, MetricsUrl):
                ServerApi(server.url, key)
        finders = [_finder(discovery) for discovery in spec.watch.discovery]
        watch_keys()
    except (ValueError, CurveKeyError) as exc:
        return fail(f"--attach: {exc}")
    problem = start_watch(spec)
    if problem is not None:
        return fail(problem)
    outputs = open_outputs(spec, dict, run_insight(spec), default_results=False)
    if isinstance(outputs, int):
        return outputs
    if not spec.front.headless:
        _import_screens()
    paces = FleetPaces()  # each plug-in server's, by address, and the fleet's
    # One watch works at a time: each on a runnable thread of its own, 64 left the screen's
    # thread 1/65 of the interpreter lock (a key took 5-10 s to show). A driver holds the turn
    # while it reads, applies and publishes a step, a /metrics watch while it reads a page
    # into figures, neither while it waits: one watch at most competes with the screen.
    turn = threading.RLock()
    pool = FleetPool()  # every watch on its loop and workers: no thread per server
    pool.start()
    freezing = freeze_start_up_heap()
    roster = FleetMembers(
        [Target(server) for server in spec.watch.servers],
        finders,
        lambda target: PooledSource(
            _source(spec, target.watch, key, paces, turn, pool, outputs), pool
        ),
    )
    roster.start()
    outputs.follow_fleet(roster, _behind)
    try:
        if spec.front.headless:
            code = watch_fleet_headless(
                roster, spec.watch.scrape_interval, spec.watch.window, outputs.printing_to()
            )
        else:
            code = asyncio.run(_fleet_tui(roster, spec.watch.window, paces))
    finally:
        freezing.cancel()
        count = len(roster.members())
        pool.halt_all()  # every watch asked at once: each stop below waits for little
        roster.stop()
        pool.stop()
        outputs.close()  # after every driver's end: what they shared (the span export) last
    outputs.report_files()
    notice(f"stopped watching {count} servers; the log is {log_path}")
    return code


def _finder(discovery: Discovery) -> Finder:
    """What follows ``discovery``: the file re-read on change, or Prometheus asked."""
    if discovery.kind == FILE_SD:
        from stepview.files.targets_file import FileFinder

        return FileFinder(discovery)
    from stepview.engine.watch.fleet.prometheus_targets import PrometheusFinder

    return PrometheusFinder(discovery)


def _import_screens() -> None:
    """Import the screens before any watch starts: once 64 watches read records on their
    threads, an import on the main thread (hundreds of files, under the GIL) took minutes."""
    import stepview.ui.app
    import stepview.ui.fleet.fleet_app
    import stepview.ui.fleet.server_app  # noqa: F401


def _source(
    spec: RunSpec,
    server: MetricsUrl | PluginRecords,
    key: ApiKey | None,
    paces: FleetPaces,
    turn: AbstractContextManager[object],
    pool: FleetPool,
    outputs: RunOutputs,
) -> Unit:
    """The watch a single ``--attach ADDRESS`` would give this server, run by the fleet's
    ``pool`` (not started), except that a plug-in server's records are read at a pace
    (``paces``: the fleet's figures need no more; a server's full view asks for each step
    while it is open), that it works only in its ``turn``, the fleet's (one at a time), and
    that it feeds the outputs a fleet takes, each server's its own sinks (``outputs``)."""
    from stepview.engine.watch.api.server_api import ServerApi

    history = spec.limits.history if not spec.front.headless else 1
    if isinstance(server, MetricsUrl):
        from stepview.engine.watch.metrics.metrics_source import MetricsSource
        from stepview.engine.watch.metrics.metrics_watch import MetricsWatch

        watch = MetricsWatch(ServerApi(server.url, key), window=spec.watch.window, turn=turn)
        return MetricsSource(watch, interval=spec.watch.scrape_interval, history=history)
    from stepview.engine.driver.loop import PhaseCallback
    from stepview.engine.watch.fleet.pooled_driver import PooledDriver
    from stepview.engine.watch.link.attached import AttachedEngine
    from stepview.insight.run import RunInsight
    from stepview.model.engine_api import Engine

    address = server.text
    pace = paces.of(address)
    context = pool.zmq_context

    def factory(phase: PhaseCallback) -> Engine:
        phase(f"connecting to {address}")
        return AttachedEngine(server, api=None, pace=pace, turn=turn, context=context)

    insight = RunInsight()  # the driver's, made here so that the outputs' sinks read it too
    driver = run_driver(
        factory,
        spec,
        sinks=outputs.sinks_for(address, insight),
        history=history,
        admit_per_step=0,
        read_only=NO_API,
        insight=insight,
        turn=turn,
    )
    return PooledDriver(driver, pace, paces.fleet)


async def _fleet_tui(roster: FleetMembers, window: float, paces: FleetPaces) -> int:
    """The fleet screen; Enter runs the chosen server's view, whose Esc comes back here (the
    server held meanwhile: if it leaves the fleet, its watch stops when the view is left; its
    records read each as a step while the view is open)."""
    from stepview.engine.watch.link.backlog import FLEET_READ_S
    from stepview.insight.fleet_order import LISTED
    from stepview.ui.app import StepviewApp
    from stepview.ui.fleet.fleet_app import FleetApp
    from stepview.ui.fleet.server_app import BACK, FleetServerApp

    current: list[FleetApp | FleetServerApp] = []
    stopping = False

    def on_signal(signum: int) -> None:
        nonlocal stopping
        stopping = True
        arm_exit_watchdog(EXIT_WATCHDOG_S, 128 + signum)
        if current:
            current[-1].exit()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    chosen: str | None = None
    sort = LISTED  # kept from one fleet screen to the next: Esc comes back to the same order
    while not stopping:
        fleet = FleetApp(roster, window=window, cursor=chosen, sort=sort)
        current[:] = [fleet]
        await fleet.run_async()
        if stopping or fleet.return_value is None:
            break
        chosen, sort = fleet.return_value, fleet.sort
        member = roster.hold(chosen)
        if member is None:  # it left between Enter and here: the fleet again
            continue
        pace = paces.each.get(chosen)
        if pace is not None:
            pace.every = 0.0
        try:
            view = FleetServerApp(member.source, cpu_budget=StepviewApp.CPU_BUDGET)
            current[:] = [view]
            await view.run_async()
        finally:
            roster.release(chosen)
            if pace is not None:
                pace.every = FLEET_READ_S
        if view.leaving != BACK:
            break
    return 0


FREEZE_AFTER_S = 10.0
"""When a fleet's start-up heap is frozen (:func:`freeze_start_up_heap`): by then every
member has opened and read its server once."""


def freeze_start_up_heap() -> threading.Timer:
    """In :data:`FREEZE_AFTER_S`, move what the fleet's watches built at start-up out of the
    collector's reach (``gc.freeze``, as vLLM's engine core does with its own start-up heap).

    A full collection holds the interpreter lock while it walks every object the process
    holds: at a thousand servers it paused every watch 370-700 ms twice a minute, and those
    pauses were the oldest rows (past 2 s behind their servers); with the start-up heap
    frozen, 160-250 ms. What is frozen and later becomes cyclic garbage (a watch of a server
    that leaves the fleet) is never collected: bounded by the start-up heap, one member each.
    """

    def freeze() -> None:
        gc.collect()
        gc.freeze()
        log.info("stepview: the fleet's start-up heap frozen (%d objects)", gc.get_freeze_count())

    timer = threading.Timer(FREEZE_AFTER_S, freeze)
    timer.daemon = True
    timer.start()
    return timer


def watch_fleet_headless(
    roster: Roster, interval: float, window: float, out: TextIO | None = None
) -> int:
    """Print one :func:`fleet_record` line per server every ``interval`` s, until a signal;
    on stderr, each change of the fleet (a server joined or left, a listing lost and back)."""
    out = sys.stdout if out is None else out
    links: dict[str, LinkNotices] = {}
    made = _Rows(window)
    with stop_on_signals() as stop:
        while not stop.wait(interval):
            for line in roster.notices():
                notice(line)
            members = roster.members()
            links = {m.address: links.get(m.address) or LinkNotices(m.address) for m in members}
            snapshots = [member.source.latest() for member in members]
            for member, snapshot in zip(members, snapshots, strict=True):
                links[member.address].on_snapshot(snapshot, ())
            rows = made.rows(members, snapshots)
            now = round(time.time(), 3)
            try:
                for row in mark_imbalance(rows):
                    out.write(json.dumps({**fleet_record(row), "time": now}) + "\n")
                out.flush()
            except BrokenPipeError:
                silence(out)
                return EXIT_BROKEN_PIPE
    return 0


_Seen = tuple[float | None, float | None, Labels]
"""What a row shows besides its snapshot: its lag, its last read and its labels."""


class _Rows:
    """Each member's row, made again only when its snapshot, lag, last read or labels
    changed: at a thousand servers, rows of servers down or not read since the last line were
    a sixth of the lines' cost (the same as the fleet screen keeps its rows)."""

    def __init__(self, window: float) -> None:
        self._window = window
        self._made: dict[str, tuple[StepSnapshot, _Seen, FleetRow]] = {}

    def rows(self, members: Sequence[Member], snapshots: Sequence[StepSnapshot]) -> list[FleetRow]:
        made, kept = self._made, {}
        for member, snapshot in zip(members, snapshots, strict=True):
            source = member.source
            seen = (_behind(source), getattr(source, "read_at", None), member.labels)
            was = made.get(member.address)
            if was is None or was[0] is not snapshot or was[1] != seen:
                row = fleet_row(member.address, snapshot, self._window, member.labels)
                was = (snapshot, seen, replace(row, behind=seen[0], read_at=seen[1]))
            kept[member.address] = was
        self._made = kept  # members that left are let go
        return [was[2] for was in kept.values()]


def _behind(source: SnapshotSource) -> float | None:
    """How many seconds a plug-in server's view is behind it (its driver's link, read off the
    driver's thread: a tuple replaced whole); None for a ``/metrics`` watch, which has none."""
    link = getattr(source, "link", None)
    return link.behind if isinstance(link, LinkState) else None
