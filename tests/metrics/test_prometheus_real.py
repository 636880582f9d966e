"""A real Prometheus scraping stepview's exporter during real engine runs (demo model): the
series as Prometheus stores them, counters across a restart of stepview, and every query of
the Grafana dashboard answered with data.

Each run is held mid-way (``tests/reliability/launcher.py hold-at``): requests finished,
others running and waiting, until the test stops it, so Prometheus scrapes a run in
progress however slow the machine. The second run serves on the same port, as a restarted
stepview under a service manager would: Prometheus sees one target whose counters went back
to zero, and ``rate``/``increase`` must count across that as they do for any exporter.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from stepview.metrics.families import StepviewMetrics
from stepview.metrics.prometheus import files
from stepview.testing.prometheus import Prometheus, Result
from stepview.testing.vllm_server import free_port
from tests.e2e.conftest import write_workload
from tests.e2e.terminal import command_env
from tests.engine.watch.attach_helpers import Watch, watching
from tests.metrics.dashboard import filled, load, queries
from tests.reliability.launcher import LAUNCHER

pytestmark = pytest.mark.engine

JOB = "stepview"
FIRST_HOLD, SECOND_HOLD = 60, 30
"""The steps before which the first and the second run are held."""
COUNTERS = ("stepview_steps_total", "stepview_budget_tokens_total")


def held_run(tmp_path: Path, name: str, hold_at: int, port: int) -> AbstractContextManager[Watch]:
    workload = write_workload(tmp_path / f"{name}.jsonl", 24, longest=480, ramp=8)
    command = [*LAUNCHER, "hold-at", str(hold_at), "--", "--headless", "--prompts", str(workload)]
    command += ["--max-num-seqs", "4", "--metrics-port", str(port)]
    command += ["--log-file", str(tmp_path / f"{name}.log")]
    return watching(command, env=command_env())


def steps_seen(result: Result, at_least: float) -> bool:
    return bool(result) and float(result[0]["value"][1]) >= at_least


def stop(run: Watch) -> None:
    run.child.send_signal(signal.SIGTERM)
    assert run.child.wait(60) == 1, run.err.rest()  # interrupted: 1, as documented


def samples(prometheus: Prometheus, expr: str) -> dict[str, list[float]]:
    """Each series of a range selector: its samples' values in time order, by label set."""
    return {
        str(sorted(series["metric"].items())): [float(v) for _, v in series["values"]]
        for series in prometheus.query(expr)
    }


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[Prometheus, int]]:
    port = free_port()
    folder = tmp_path / "prometheus"
    folder.mkdir()
    rules = [files() / "stepview-rules.yml"]
    with Prometheus(folder, {JOB: [f"127.0.0.1:{port}"]}, rule_files=rules) as server:
        yield server, port


def test_prometheus_stores_the_series_counts_across_a_restart_and_fills_the_dashboard(
    tmp_path: Path, prometheus: tuple[Prometheus, int]
) -> None:
    server, port = prometheus
    steps = f'stepview_steps_total{{job="{JOB}"}}'
    with held_run(tmp_path, "first", FIRST_HOLD, port) as run:
        server.wait_for(steps, lambda r: steps_seen(r, FIRST_HOLD - 1), timeout=240)
        # The first run's figures as Prometheus stored them: names, types, labels (read
        # while it runs: once its target stops answering, Prometheus marks them stale).
        names = {s["__name__"] for s in server.api("series", **{"match[]": '{job="stepview"}'})}
        metadata = server.api("metadata")
        waiting = server.query(f'stepview_waiting_requests{{job="{JOB}"}}')
        first_created = server.query(f'stepview_steps_created{{job="{JOB}"}}')[0]["value"][1]
        stop(run)
    suffix = {"counter": "_total", "info": "_info"}
    families = StepviewMetrics(process=False).registry.collect()
    expected = {family.name + suffix.get(family.type, "") for family in families}
    expected -= {"stepview_rank_connected"}  # only with --attach-ranks
    assert expected <= names, expected - names
    for name in COUNTERS:
        assert metadata[name.removesuffix("_total")][0]["type"] == "counter", name
    assert {frozenset(s["metric"]) - {"__name__", "job", "instance"} for s in waiting} == {
        frozenset({"rank", "reason"})
    }

    with held_run(tmp_path, "second", SECOND_HOLD, port) as run:
        # The restarted stepview: a new _created, and its own steps counted from zero.
        server.wait_for(
            f'stepview_steps_created{{job="{JOB}"}} != {first_created}', bool, timeout=240
        )
        server.wait_for(steps, lambda r: steps_seen(r, SECOND_HOLD - 1), timeout=240)
        server.wait_for(f"count_over_time({steps}[5m])", lambda r: steps_seen(r, 6), timeout=60)

        # Counters only go up within a run, and go back to zero once, at the restart.
        for name in COUNTERS:
            for labels, values in samples(server, f'{name}{{job="{JOB}"}}[5m]').items():
                drops = [i for i in range(1, len(values)) if values[i] < values[i - 1]]
                assert len(drops) <= 1, (name, labels, values)
            assert server.query(f'resets({name}{{job="{JOB}"}}[5m]) > 0'), name
        # Prometheus counts across the reset: at least the second run's own steps, never less.
        increase = server.query(f"increase({steps}[5m])")
        assert float(increase[0]["value"][1]) >= SECOND_HOLD - 1, increase

        # Every query of the dashboard answers with data from these runs.
        instance = f"127.0.0.1:{port}"
        ranks = server.api("label/rank/values", **{"match[]": "stepview_waiting_requests"})
        assert ranks == ["0"]
        empty = [
            (query.panel, query.ref)
            for query in queries(load())
            if not server.query(filled(query.expr, {"instance": instance, "rank": "0"}))
        ]
        assert empty == [], empty
        # The shipped recording rules, evaluated by Prometheus on the real series.
        for recorded in (
            "instance:stepview_waiting_requests:sum",
            "instance:stepview_steps:rate5m",
        ):
            assert server.query(f'{recorded}{{job="{JOB}"}}'), recorded
        stop(run)
