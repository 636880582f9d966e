"""``--attach prometheus://`` against the real Prometheus (2.42): it lists two fake vLLM servers
from a file_sd file; stepview's discovery finds both with Prometheus' labels (by job, and by
vLLM's series without one, leaving out Prometheus' own page), watches them, and when one is
taken out of Prometheus' file, sees it leave and stops its watch.

The servers are stdlib HTTP servers answering a real vLLM 0.32 ``/metrics`` capture
(``fake_metrics.py``): what is tested is Prometheus' side, which is real. Needs the
``prometheus`` command: without it the test fails, saying so (never skipped).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from stepview.engine.watch.api.server_api import ServerApi
from stepview.engine.watch.fleet.fleet_members import FleetMembers
from stepview.engine.watch.fleet.prometheus_targets import PrometheusFinder
from stepview.engine.watch.metrics.metrics_source import MetricsSource
from stepview.engine.watch.metrics.metrics_watch import MetricsWatch
from stepview.model.address import prometheus_discovery
from stepview.model.snapshot import EngineState
from stepview.model.source import SnapshotSource
from stepview.model.targets import Target
from tests.engine.watch.fake_metrics import FakeMetrics
from tests.engine.watch.real_prometheus import (
    prometheus_binary,
    running_prometheus,
    write_targets,
)

# Prometheus applies a change of its targets within ~5 s (its scrape manager's update
# interval); a loaded machine makes that longer.
CHANGE_S = 60.0


def eventually(check: Callable[[], bool], timeout: float, what: Callable[[], object]) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s; last seen: {what()}")
        time.sleep(0.1)


def watch(target: Target) -> SnapshotSource:
    return MetricsSource(MetricsWatch(ServerApi(target.address)), interval=0.2, history=1)


def test_the_real_prometheus_lists_the_fleet_and_a_server_taken_out_leaves(
    fake_metrics: FakeMetrics, tmp_path: Path
) -> None:
    a, b = fake_metrics, FakeMetrics()
    b.start()
    targets = tmp_path / "targets.json"
    groups = [
        {"targets": [f"127.0.0.1:{a.port}"], "labels": {"zone": "a", "pool": "prefill"}},
        {"targets": [f"127.0.0.1:{b.port}"], "labels": {"zone": "b", "pool": "decode"}},
    ]
    write_targets(targets, groups)
    try:
        with running_prometheus(tmp_path, {"vllm": targets}) as prometheus:
            address = f"prometheus://{prometheus}?job=vllm"
            fleet = FleetMembers([], [PrometheusFinder(prometheus_discovery(address), 0.5)], watch)
            fleet.start()
            try:

                def listed() -> dict[str, dict[str, str]]:
                    return {m.address: dict(m.labels) for m in fleet.members()}

                eventually(lambda: len(listed()) == 2, CHANGE_S, listed)
                assert listed() == {
                    a.url: {
                        "instance": f"127.0.0.1:{a.port}",
                        "job": "vllm",
                        "pool": "prefill",
                        "zone": "a",
                    },
                    b.url: {
                        "instance": f"127.0.0.1:{b.port}",
                        "job": "vllm",
                        "pool": "decode",
                        "zone": "b",
                    },
                }
                for member in fleet.members():  # each watched through its own /metrics
                    eventually(
                        lambda m=member: m.source.latest().engine_state is EngineState.IDLE,  # type: ignore[misc]
                        30,
                        member.source.latest,
                    )
                # Without a job: the targets Prometheus has scraped vLLM's series from, not
                # its own page (job "prometheus", a /metrics too).
                every = PrometheusFinder(prometheus_discovery(f"prometheus://{prometheus}"))
                eventually(lambda: len(every.poll()) == 2, CHANGE_S, every.poll)
                assert {t.address for t in every.poll()} == {a.url, b.url}

                gone = next(m for m in fleet.members() if m.address == b.url).source
                write_targets(targets, groups[:1])  # b taken out of Prometheus' file
                eventually(lambda: list(listed()) == [a.url], CHANGE_S, listed)
                # Its watch stopped (just after the list changed: readers never wait for it).
                eventually(lambda: not gone.alive, 10, lambda: gone)
                assert f"{b.url} left (no longer listed by {address})" in fleet.notices()
            finally:
                fleet.stop()
    finally:
        b.stop()


def test_without_prometheus_a_test_that_needs_it_fails_saying_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Never a skip: a machine without it must not pass the real-Prometheus tests silently."""
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match="Prometheus is not installed"):
        prometheus_binary()
