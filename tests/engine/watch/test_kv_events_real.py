"""``stepview --attach http://… --kv-events tcp://… --headless`` on vLLM's real API server.

The server (the run's shared ``plain_server``, ``tests/servers.py``) runs the demo model as
vLLM ships it (no plug-in), publishing its KV-cache events (``--kv-events-config``, zmq, all
topics). Two completions share a 219-token prefix (one
128-token block) and are sent one after the other, so that the second finds the prefix in the
cache: the JSON lines must show blocks stored (churn), the blocks resident, and the reuse — as
the server's own /metrics counts its prefix-cache hit.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from stepview.testing.vllm_server import complete
from tests.engine.watch.attach_helpers import EXIT_S, watching
from tests.engine.watch.test_metrics_attach_real import next_record
from tests.servers import Served

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]
PREFIX = "Once upon a time in a land far away there lived " * 12


def test_block_churn_and_prefix_reuse_from_a_real_servers_kv_events(
    plain_server: Served, tmp_path: Path
) -> None:
    api, url, kv = plain_server.api, plain_server.url, plain_server.kv_events
    assert kv is not None
    command = [
        sys.executable,
        "-m",
        "stepview",
        *("--attach", url, "--kv-events", kv, "--headless", "--scrape-interval", "0.5"),
        *("--log-file", str(tmp_path / "stepview.log")),
    ]
    with watching(command) as watch:
        # Connected first: the server's PUB socket drops what it sends before then.
        idle = next_record(watch, lambda r: r["state"] == "idle" and r["kv_blocks"]["connected"])
        assert idle["kv_blocks"]["address"] == kv and idle["kv_blocks"]["batches"] == 0

        first = complete(api.port, PREFIX + "a king", 40, ignore_eos=True)
        stored = next_record(watch, lambda r: r["kv_blocks"]["stored"] >= 2)
        assert stored["kv_blocks"]["stored_per_s"] > 0 and stored["kv_blocks"]["resident"] >= 2
        assert stored["kv_blocks"]["reused"] == 0

        second = complete(api.port, PREFIX + "a queen", 40, ignore_eos=True)
        assert first["usage"]["prompt_tokens"] >= 128 and second["usage"]["prompt_tokens"] >= 128
        reused = next_record(watch, lambda r: r["kv_blocks"]["reused"] > 0)
        blocks = reused["kv_blocks"]
        assert blocks["reused"] == 1 and blocks["stored"] == 3  # the prefix's block, once
        assert blocks["stored_per_s"] > 0 and blocks["resident"] == 3
        assert blocks["reuse_share"] == 0.25 and blocks["missed"] == blocks["restarts"] == 0
        assert reused["prefix_cache_hit_rate"] > 0  # the server's own count agrees: a hit
        print(json.dumps(reused))  # for the record (-s)

        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(EXIT_S) == 0, watch.err.rest()
