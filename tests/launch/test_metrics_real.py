"""``--metrics-port`` on real vLLM (demo model): scraped over HTTP while a headless run works
through a queue, and a port in use refused before the engine starts."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from tests.e2e.terminal import command_env
from tests.engine.watch.attach_helpers import watching
from tests.metrics.scrape import scraped_until, value, waiting

pytestmark = pytest.mark.engine


def stepview(tmp_path: Path, *args: str) -> list[str]:
    log = str(tmp_path / "log.txt")
    return [sys.executable, "-m", "stepview", "--log-file", log, *args]


def test_scraped_while_a_live_run_works_through_its_queue(tmp_path: Path) -> None:
    # Two running slots for 24 requests of 300 tokens: most of the run (seconds even on a
    # quiet machine), most of them wait.
    load = ["--load", "24", "--rate", "inf", "--input-len", "8:16", "--output-len", "300:300"]
    args = ["--headless", "--json", *load, "--max-num-seqs", "2", "--metrics-port", "0"]
    with watching(stepview(tmp_path, *args), env=command_env()) as run:
        url = run.err.wait_for("serving metrics at", timeout=60).rsplit(" ", 1)[-1]
        samples = scraped_until(
            url,
            lambda s: (
                waiting(s).get("max_num_seqs", 0) >= 10 and value(s, "stepview_steps_total") > 5
            ),
            timeout=180,  # the metrics are served before the engine is built
        )
        assert set(waiting(samples)) <= {"max_num_seqs", "token_budget", "kv_cache", "unknown"}
        assert value(samples, "stepview_budget_tokens_total", kind="prefill") > 0
        assert value(samples, "stepview_budget_tokens_total", kind="decode") > 0
        assert value(samples, "stepview_oldest_waiting_request_age_seconds") > 0
        assert value(samples, "stepview_engine_state", stepview_engine_state="running") == 1
        info = [k for k in samples if k[0] == "stepview_engine_info"]
        assert info and dict(info[0][1])["vllm_version"]
        assert value(samples, "process_resident_memory_bytes") > 0
        assert run.child.wait(120) == 0, run.err.rest()
    records = [json.loads(line) for line in run.out.rest()]
    assert len(records) == 24 and {r["state"] for r in records} == {"finished"}


def test_a_port_in_use_is_refused_before_the_engine_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["--headless", "--metrics-port", str(port), "--results", str(tmp_path / "r.jsonl")]
        with watching(stepview(tmp_path, *args), env=command_env()) as run:
            assert run.child.wait(120) == 2
            assert run.err.rest() == [
                f"stepview: cannot serve metrics on 127.0.0.1:{port}: address in use"
            ]
            assert run.out.rest() == []
    assert not (tmp_path / "r.jsonl").exists()
