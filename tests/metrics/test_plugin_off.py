"""A scheduler plug-in that switched itself off reaches ``stepview_plugin_active``, whatever runs.

The plug-in switches itself off in a vLLM whose scheduler it cannot read, and the server runs
on as before: only the per-request view is gone, and nothing in vLLM's ``/metrics`` says so.
The word reaches stepview three ways, each tested here without vLLM: a watched server's records
(a record carrying ``plugin_off``, per engine core, cleared by a record of a step), stepview's
own engine core in its own process (the same record, after which its link offers no entries),
and stepview's own engine in any mode (its steps come without the scheduler's entries). Each
ends as the snapshot's ``info.detailed_states``, which the exporter turns into the gauge.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import msgspec

from stepview.engine.driver.loop import Driver
from stepview.engine.own.core_link import SubscribedLink
from stepview.engine.records.facts import StepFacts
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.metrics.exporter import MetricsExporter
from stepview.model.address import plugin_records
from stepview.model.commands import AddRequest
from stepview.model.engine_api import StepResult
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.testing.fake_engine import FakeEngine
from tests.engine.watch.attach_helpers import Server, ipc_address, record, request, wait_until
from tests.helpers import wait_for
from tests.metrics.build import value

WHY = "vLLM 0.35.0's scheduler has no deferred_waiting"


def _off(rank: int = 0) -> StepFacts:
    """The record a plug-in sends in place of steps once it is off (see its vllm_versions)."""
    return msgspec.structs.replace(record(0, rank=rank, idle=True), plugin_off=WHY)


def test_a_watched_server_whose_plugin_is_off_says_so_until_a_step_comes(
    tmp_path: Path,
) -> None:
    server = Server(ipc_address(tmp_path))
    engine = AttachedEngine(plugin_records(server.address))
    exporter = MetricsExporter(process=False)
    try:
        server.wait_subscribed()
        assert engine.info.detailed_states
        server.send(_off())

        def told() -> bool:
            engine.has_unfinished()  # reads the sockets, as the driver's loop does
            return not engine.info.detailed_states

        wait_until(told)
        assert WHY in engine.link().message
        exporter.on_snapshot(_snapshot(engine, 1), ())
        assert value(exporter, "stepview_plugin_active") == 0

        # The server restarted with a vLLM the plug-in reads: its records come again.
        server.send(record(1, request("a-0123abcd")))
        wait_until(lambda: engine.has_unfinished() and engine.info.detailed_states)
        exporter.on_snapshot(_snapshot(engine, 2), ())
        assert value(exporter, "stepview_plugin_active") == 1
    finally:
        engine.shutdown()
        server.kill()


def test_own_engine_core_process_offers_no_entries_once_its_plugin_is_off(
    tmp_path: Path,
) -> None:
    link = SubscribedLink(ipc_address(tmp_path))
    server = Server(link.address)
    try:
        server.wait_subscribed()
        assert link.subscriber.wait_connected(5.0) and link.available
        server.send(_off())
        wait_until(lambda: link.take(None) == [] and not link.available)
    finally:
        link.close()
        server.kill()


class _GoesOff(FakeEngine):
    """The fake engine whose plug-in switches itself off after ``on_for`` steps: its steps
    then carry no scheduler entries (``scheduled is None``), as vLLM's do."""

    def __init__(self, on_for: int) -> None:
        super().__init__()
        self.on_for = on_for
        self.steps = 0

    def step(self) -> StepResult:
        result = super().step()
        self.steps += 1
        return result if self.steps <= self.on_for else replace(result, scheduled=None)


def test_own_engine_whose_steps_lose_their_entries_is_reported_off() -> None:
    exporter = MetricsExporter(process=False)
    engine = _GoesOff(on_for=3)
    driver = Driver(lambda phase: engine, sinks=[exporter])
    driver.start()
    try:
        spec = SamplingSpec(max_tokens=2, temperature=0.0)
        driver.send(AddRequest("r0", "hello there", spec))
        first = wait_for(driver, lambda s: s.step >= 1)
        assert first.info.detailed_states and value(exporter, "stepview_plugin_active") == 1
        for i in range(1, 4):
            driver.send(AddRequest(f"r{i}", "hello there", spec))
        off = wait_for(driver, lambda s: s.step > 3 and not s.info.detailed_states)
        assert off.info.model == first.info.model  # the rest of the description is kept
        wait_for(driver, lambda s: len(s.finished) == 4)  # states from outputs alone
    finally:
        driver.stop()
    assert value(exporter, "stepview_plugin_active") == 0


def _snapshot(engine: AttachedEngine, step: int) -> StepSnapshot:
    """A snapshot carrying the engine's description, as the driver's publisher builds it."""
    return StepSnapshot(step, float(step), EngineState.IDLE, info=engine.info)
