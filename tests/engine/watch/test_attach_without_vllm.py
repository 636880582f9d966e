"""``--attach`` on a machine without vLLM or torch: the install pyproject promises for a laptop.

The child process runs with ``tests/hide_vllm`` on its path, so ``import vllm``, ``import
torch`` and ``import transformers`` fail in it as if they were not installed. If anything on the
attach path (the command line, the watching client, the driver, the results file, the trace,
the latency table) reached for them, the watch would die instead of printing its results.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stepview.engine.records.facts import EndedFacts
from tests.engine.watch.attach_helpers import (
    EXIT_S,
    Server,
    record,
    request,
    watch_command,
    watching,
)
from tests.engine.watch.fake_api import FakeApi
from tests.engine.watch.fake_metrics import FakeMetrics, capture
from tests.helpers import ROOT


def test_attach_headless_runs_with_vllm_and_torch_hidden(
    server: Server, fake_api: FakeApi, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests' / 'hide_vllm'}{os.pathsep}{ROOT}"}
    results, trace = tmp_path / "results.jsonl", tmp_path / "run.trace.jsonl"
    command = [
        *watch_command(server.address, tmp_path),
        *("--api", fake_api.url, "--results", str(results), "--record", str(trace)),
    ]
    with watching(command, env=env) as watch:
        server.wait_subscribed(timeout=30)
        watch.err.wait_for("stepview: watching")
        server.send(
            record(1, request("a-0123abcd", outputs=1, new=[7])),
            record(
                2,
                idle=True,
                finished=["a-0123abcd"],
                ended=[EndedFacts("a-0123abcd", 2, [7, 8], "stop")],
            ),
        )
        done = json.loads(watch.out.wait_for('"id": "a"'))
        assert (done["state"], done["completions"][0]["token_ids"]) == ("finished", [7, 8])
        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(EXIT_S) == 0, watch.err.rest()
        lines = watch.err.rest()
        assert not any("hidden by tests/hide_vllm" in line for line in lines), lines
        assert any("TTFT" in line for line in lines), lines
    assert [json.loads(line)["id"] for line in results.read_text().splitlines()] == ["a"]
    assert trace.read_text().count('"k":"step"') >= 2


def test_http_attach_headless_runs_with_vllm_and_torch_hidden(
    fake_metrics: FakeMetrics, tmp_path: Path
) -> None:
    """``--attach http://…`` on a laptop: a JSON line per scrape, lost and back, Ctrl+C."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests' / 'hide_vllm'}{os.pathsep}{ROOT}"}
    env["VLLM_API_KEY"] = "s3cret"
    fake_metrics.api_key = "s3cret"
    command = [
        *watch_command(fake_metrics.url, tmp_path),
        *("--scrape-interval", "0.2", "--window", "30"),
    ]

    def line_where(wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first line from now on that is ``wanted``."""
        found = watch.out.wait_until(
            lambda line: wanted(json.loads(line)), timeout=30, since=len(watch.out.seen)
        )
        return dict(json.loads(found))

    with watching(command, env=env) as watch:
        first = line_where(lambda r: r["state"] == "idle")
        assert first["server"] == fake_metrics.url and first["model"] == "stepview-demo-tiny"
        assert first["waiting_by_reason"] == {"capacity": 0, "deferred": 0}
        assert first["ttft_s"] == {"p50": None, "p90": None, "p99": None, "observed": 0}
        watch.err.wait_for("--scheduler-cls stepview.engine.scheduler_plugin.StepviewScheduler")
        fake_metrics.page = capture("busy")
        busy = line_where(lambda r: r["running"] == 40)
        assert busy["state"] == "running" and busy["ttft_s"]["observed"] == 40
        fake_metrics.page = capture("after")
        after = line_where(lambda r: r["finished"] == {"length": 40})
        assert after["e2e_s"]["p50"] is not None and after["finished_total"] == 40

        fake_metrics.stop()
        watch.err.wait_for(f"DISCONNECTED from {fake_metrics.url}", timeout=30)
        line_where(lambda r: r["state"] == "disconnected")
        fake_metrics.page = capture("idle")  # restarted: its counters from 0
        fake_metrics.start()
        watch.err.wait_for(f"back in touch with {fake_metrics.url}", timeout=30)
        back = line_where(lambda r: r["state"] == "idle" and r["finished_total"] == 0)
        assert back["finished"] == {"length": 40}  # the window keeps what it saw
        assert "ranks" not in back  # one engine core
        fake_metrics.page = capture("dp2-busy")  # --data-parallel-size 2: each rank's figures
        both = line_where(lambda r: r["running"] == 150)
        assert [(r["rank"], r["up"], r["running"], r["waiting"]) for r in both["ranks"]] == [
            (0, True, 75, 0),
            (1, True, 75, 0),
        ]

        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(EXIT_S) == 0, watch.err.rest()
        errors = watch.err.rest()
    assert not any("hidden by tests/hide_vllm" in line for line in errors), errors
    assert not any("s3cret" in line for line in errors + watch.out.seen)
    assert all(a == "Bearer s3cret" for a in fake_metrics.authorizations)
