"""The plug-in against the vLLM version it runs in, on fake schedulers (no engine started).

Which steps hold prefills follows the running version's rule (0.32: only the data-parallel
engine core's ``throttle_prefills``; 0.33: also the scheduler's own cadence), and a scheduler
without something the plug-in reads switches it off: one log line naming the vLLM version, no
exception into vLLM, and whoever listens (the in-process listener, an attached stepview) told
why.

Marked ``engine``: no engine starts, but the plug-in imports vLLM (it runs inside vLLM's
engine core), so these run where vLLM is installed, not in the quick loop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from stepview.engine.plugin import vllm_versions as versions
from stepview.engine.plugin.capture import CoreCapture
from stepview.engine.plugin.config import local_listener
from stepview.engine.plugin.scheduler import connected
from stepview.engine.records.channel import PUBLISH_ENV, PUBLISH_EVERY_ENV
from stepview.engine.records.vllm_versions import RULES_0_32, RULES_0_33
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.model.address import plugin_records
from tests.engine.plugin.fake_scheduler import FakeRequest, FakeScheduler, ListSink, _output
from tests.engine.watch.attach_helpers import ipc_address, wait_until

pytestmark = pytest.mark.engine


def _cadence(interval: int, executed: int, last_prefill: int) -> FakeScheduler:
    """A fake 0.33 scheduler keeping its own prefill cadence, one request decoding."""
    scheduler = FakeScheduler({})
    scheduler.running = [FakeRequest(object(), 8, 9, num_output_tokens=1)]
    scheduler.running[0].is_prefill_chunk = False  # type: ignore[attr-defined]
    scheduler.local_prefill_interval = interval  # type: ignore[attr-defined]
    scheduler.num_executed_steps = executed  # type: ignore[attr-defined]
    scheduler.last_prefill_step = last_prefill  # type: ignore[attr-defined]
    return scheduler


def test_prefills_are_held_by_the_running_versions_rule() -> None:
    within = _cadence(interval=4, executed=5, last_prefill=4)  # 2 steps since: held on 0.33
    assert versions.prefills_held(within, False, RULES_0_33)
    assert not versions.prefills_held(within, False, RULES_0_32)  # 0.32: no local cadence
    assert versions.prefills_held(within, True, RULES_0_32)  # the DP core's throttle
    assert not versions.prefills_held(_cadence(4, 7, 4), False, RULES_0_33)  # interval over
    assert not versions.prefills_held(_cadence(1, 5, 4), False, RULES_0_33)  # no cadence
    bound = _cadence(4, 5, 4)
    bound.prefill_capacity_bound = True  # the last release could not drain the queue
    assert not versions.prefills_held(bound, True, RULES_0_33)
    prefilling = _cadence(4, 5, 4)
    prefilling.running[0].is_prefill_chunk = True  # type: ignore[attr-defined]
    assert not versions.prefills_held(prefilling, True, RULES_0_33)  # nobody decodes


def test_the_record_says_the_version_the_interval_and_whether_prefills_were_held() -> None:
    scheduler = _cadence(4, 5, 4)
    scheduler.scheduler_config.prefill_schedule_interval = 4
    scheduler.requests = {"w": FakeRequest(_waiting(), 40, request_id="w")}
    capture = CoreCapture(scheduler)
    capture.sink = sink = ListSink()
    capture.before_schedule(scheduler, True)  # nobody listened yet: not even read
    capture.after_schedule(scheduler, _output({}))
    assert sink.records[-1].prefills_held is False
    capture.before_schedule(scheduler, True)  # throttled by the data-parallel core
    capture.after_schedule(scheduler, _output({}))
    record = sink.records[-1]
    assert (record.vllm_version, record.prefill_interval, record.prefills_held) == (
        versions.RUNNING,
        4,
        True,
    )
    capture.before_schedule(scheduler, False)
    capture.after_schedule(scheduler, _output({}))
    assert sink.records[-1].prefills_held is versions.RULES.local_prefill_interval


def _waiting() -> object:
    from vllm.v1.request import RequestStatus

    return RequestStatus.WAITING


@pytest.fixture
def plugin_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """The plug-in's log lines, each once (see test_scheduler_plugin_capture's own such test)."""
    caplog.set_level(logging.WARNING, logger="stepview.engine.plugin")
    logger = logging.getLogger("stepview.engine.plugin")
    logger.addHandler(caplog.handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        yield caplog
    finally:
        logger.removeHandler(caplog.handler)
        logger.propagate = propagate


def test_a_scheduler_without_what_the_plugin_reads_switches_it_off_once_and_says_why(
    plugin_log: pytest.LogCaptureFixture,
) -> None:
    scheduler = FakeScheduler({})
    del scheduler.deferred_waiting  # a vLLM that moved it
    told: list[object] = []
    with local_listener(told.append) as binding:
        capture = connected(CoreCapture(scheduler))
    why = f"vLLM {versions.RUNNING}'s scheduler has no deferred_waiting"
    assert capture.failure == why and capture.sink is None
    assert binding.failure == why  # stepview's own engine hears it from the listener
    capture.before_schedule(scheduler, False)
    capture.after_schedule(scheduler, _output({"x": 1}))  # off: nothing read, nothing raised
    assert told == []
    lines = [r.getMessage() for r in plugin_log.records]
    assert lines == [f"stepview: scheduler plug-in switched off ({why}); vLLM runs on"]


def test_an_attribute_gone_mid_run_switches_it_off_with_the_version_not_into_vllm(
    plugin_log: pytest.LogCaptureFixture,
) -> None:
    scheduler = FakeScheduler({"w": FakeRequest(_waiting(), 40)})
    capture = CoreCapture(scheduler)
    capture.sink = sink = ListSink()
    del scheduler.kv_holding_waiting
    capture.after_schedule(scheduler, _output({}))  # must not raise
    capture.after_schedule(scheduler, _output({}))
    assert sink.closed and sink.records == [] and capture.sink is None
    (line,) = [r.getMessage() for r in plugin_log.records]
    assert "switched off" in line and "kv_holding_waiting" in line
    assert f"(vLLM {versions.RUNNING})" in line


def test_an_attached_stepview_is_told_the_plugin_is_off_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plugin_log: pytest.LogCaptureFixture
) -> None:
    address = ipc_address(tmp_path)
    monkeypatch.setenv(PUBLISH_ENV, address)
    monkeypatch.setenv(PUBLISH_EVERY_ENV, "0")
    scheduler = FakeScheduler({})
    scheduler.parallel_config = SimpleNamespace()  # data_parallel_rank moved: read fails
    del scheduler.policy
    capture = connected(CoreCapture(scheduler))  # publishes nothing but why it is off
    assert capture.failure is not None and "policy" in capture.failure
    engine = AttachedEngine(plugin_records(address))
    try:
        wait_until(lambda: not engine.has_unfinished() and "off" in engine.link().message, 10)
        message = engine.link().message
        assert f"vLLM {versions.RUNNING}'s scheduler has no policy" in message, message
        assert "no per-request view" in message
        assert not engine.has_unfinished()  # the word is no step
        engine.link()  # reading again (the off record is re-sent to new subscribers only)
        assert not engine.has_unfinished()
    finally:
        engine.shutdown()
