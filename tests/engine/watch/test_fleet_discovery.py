"""``stepview --headless`` on a fleet found where it is listed, as a user runs it (a child
process, vLLM and torch hidden from it): JSON lines for the servers listed now, with their
labels; stderr when one joins or leaves, and when the listing cannot be read; Ctrl+C ends it.

The servers are fake vLLM ``/metrics`` pages (real captures); the listings a file_sd file
rewritten while watching, and a fake Prometheus that is down at first."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.watch.attach_helpers import EXIT_S, round_of, watching
from tests.engine.watch.fake_metrics import FakeMetrics
from tests.engine.watch.fake_prometheus import FakePrometheus, Listed
from tests.helpers import ROOT

HIDDEN = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests' / 'hide_vllm'}{os.pathsep}{ROOT}"}


def fleet_command(folder: Path, *args: str) -> list[str]:
    return [
        *(sys.executable, "-m", "stepview", *args, "--headless", "--scrape-interval", "0.2"),
        *("--log-file", str(folder / "stepview.log")),
    ]


@pytest.fixture
def pages(fake_metrics: FakeMetrics) -> Iterator[list[FakeMetrics]]:
    more = [FakeMetrics(), FakeMetrics()]
    for page in more:
        page.start()
    yield [fake_metrics, *more]
    for page in more:
        page.stop()


def test_a_file_sd_fleet_follows_its_file_headless(
    pages: list[FakeMetrics], tmp_path: Path
) -> None:
    a, b, c = pages
    path = tmp_path / "targets.yml"

    def listing(*servers: FakeMetrics) -> None:
        text = "".join(
            f"- targets: ['127.0.0.1:{s.port}']\n  labels: {{zone: z{s.port}}}\n" for s in servers
        )
        path.with_suffix(".new").write_text(text)
        os.replace(path.with_suffix(".new"), path)

    listing(a, b)
    with watching(fleet_command(tmp_path, "--attach-file", str(path)), HIDDEN) as watch:
        watch.err.wait_for(f"{a.url} joined (listed by {path}: zone=z{a.port})")
        watch.err.wait_for(f"{b.url} joined")
        rows = round_of(watch, {a.url, b.url}, lambda record: record["state"] == "idle")
        assert rows[a.url]["labels"] == {"zone": f"z{a.port}"}
        assert rows[a.url]["model"] == "stepview-demo-tiny"
        for row in rows.values():  # the moment of its figures: its page read before the line
            assert row["read_at"] is not None and 0 <= row["time"] - row["read_at"] < 10, row
        listing(b, c)
        watch.err.wait_for(f"{a.url} left (no longer listed by {path})")
        watch.err.wait_for(f"{c.url} joined")
        assert round_of(watch, {b.url, c.url})[c.url]["labels"] == {"zone": f"z{c.port}"}
        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(EXIT_S) == 0
    assert "stopped watching 2 servers" in "".join(watch.err.rest())


def test_a_prometheus_down_at_first_is_said_and_asked_again(
    pages: list[FakeMetrics], fake_prometheus: FakePrometheus, tmp_path: Path
) -> None:
    a = pages[0]
    fake_prometheus.stop()  # down when stepview starts
    fake_prometheus.targets = [Listed(f"{a.url}/metrics", labels={"zone": "a"})]
    fake_prometheus.vllm = {f"{a.url}/metrics"}
    with watching(fleet_command(tmp_path, "--attach", fake_prometheus.address), HIDDEN) as watch:
        line = watch.err.wait_for("cannot reach it")
        assert line == (
            f"stepview: {fake_prometheus.address}: cannot reach it (connection refused); asking "
            "again every 5 s"
        )
        fake_prometheus.start()  # up, on the same port
        watch.err.wait_for(f"{fake_prometheus.address}: answers again", timeout=20)
        watch.err.wait_for(f"{a.url} joined (listed by {fake_prometheus.address}: ")
        rows = round_of(watch, {a.url})
        assert rows[a.url]["labels"] == {
            "instance": f"127.0.0.1:{a.port}",
            "job": "vllm",
            "zone": "a",
        }
        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(EXIT_S) == 0
