"""``stepview --attach ADDRESS --headless --metrics-port 0``: the metrics scraped over HTTP
while the real command watches a publisher that plays an engine core (no vLLM).

The records make known scenes: a scan stopped at one request with three behind it, then a
preemption that keeps the whole queue out for the KV cache; each scrape must say so.
"""

from __future__ import annotations

import signal
from pathlib import Path

import msgspec

from tests.engine.watch.attach_helpers import (
    EXIT_S,
    PREEMPTED,
    WAITING,
    Server,
    record,
    request,
    watch_command,
    watching,
)
from tests.metrics.scrape import scrape, scraped_until, value, waiting


def test_the_metrics_follow_the_server_while_it_runs(server: Server, tmp_path: Path) -> None:
    command = [*watch_command(server.address, tmp_path), "--metrics-port", "0"]
    with watching(command) as watch:
        line = watch.err.wait_for("serving metrics at")
        url = line.rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")  # loopback
        server.wait_subscribed(timeout=30)
        watch.err.wait_for("stepview: watching")
        idle = scrape(url)
        assert idle[("stepview_preemptions_total", frozenset())] == 0
        assert waiting(idle) == {}

        # vLLM's scan stopped at h (too few KV blocks): three wait behind it.
        runner = request("r-0123abcd", outputs=1, new=[7])
        queue = [request(f"{n}-0123abcd", WAITING, waited=2.0) for n in ("h", "w1", "w2", "w3")]
        server.send(record(1, runner, *queue, head="h-0123abcd"))
        # A scrape may see a step's figures half written (the exporter never makes the driver
        # wait for one): each scene is waited for whole; it then holds (no record follows).
        scraped_until(
            url,
            lambda s: (
                waiting(s) == {"behind": 3, "kv_cache": 1}
                and value(s, "stepview_oldest_waiting_request_age_seconds") >= 2.0
                and value(s, "stepview_step_budget_tokens", kind="decode") == 1
                and value(s, "stepview_budget_tokens_total", kind="decode") == 1
                and value(s, "stepview_engine_state", stepview_engine_state="running") == 1
            ),
        )

        # The runner is preempted: this step admits nobody, everyone waits for the KV cache.
        evicted = request("r-0123abcd", PREEMPTED, outputs=1, computed=0, preemptions=1)
        step = record(2, evicted, *queue, head="h-0123abcd", full=False)
        server.send(msgspec.structs.replace(step, preempted=["r-0123abcd"]))
        scraped_until(
            url,
            lambda s: (
                value(s, "stepview_preemptions_total") == 1
                and waiting(s) == {"kv_cache": 5}
                and value(s, "stepview_preemption_lost_tokens_total") > 0
                and value(s, "stepview_steps_total") == 2
                and value(s, "stepview_view_behind_seconds") == 0
            ),
        )

        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(EXIT_S) == 0
