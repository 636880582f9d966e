"""``stepview --attach http://HOST:PORT --headless`` on vLLM's real API server, unmodified.

The server runs the demo model as vLLM ships it: no plug-in, no ``STEPVIEW_PUBLISH``, and at
most two requests running (``--max-num-seqs 2``), so that six completions sent at once make
four wait for a running slot. The watcher reads only the server's ``/metrics``; its JSON lines
must show the two running, the four waiting (vLLM's reason: ``capacity``), the six finished,
and their latency percentiles; Ctrl+C ends it normally.

The watch runs at a lower priority than the server (as it does beside a real one), so on a
busy machine one scrape can take longer than a whole burst: the burst is sent again until a
scrape has caught it in flight, and the window covers every burst.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.vllm_server import ApiServer, complete, free_port, server_command, server_env
from tests.engine.watch.attach_helpers import Watch, watching

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]
COMPLETIONS = 6
BURSTS = 5


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ApiServer]:
    from stepview.engine.own.tiny_model import ensure_tiny_model

    port = free_port()
    command = [*server_command(ensure_tiny_model(), port, plugin=False), "--max-num-seqs", "2"]
    api = ApiServer(command, server_env(None), port, tmp_path / "server.log")
    api.start()
    try:
        yield api
    finally:
        api.kill()


def next_record(watch: Watch, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The first JSON line from now on that is ``wanted``."""
    line = watch.out.wait_until(
        lambda text: wanted(json.loads(text)), timeout=120, since=len(watch.out.seen)
    )
    return dict(json.loads(line))


def burst(port: int) -> int:
    """:data:`COMPLETIONS` completions sent at once, all answered; how many."""
    answers: list[dict[str, Any]] = []
    clients = [
        threading.Thread(
            target=lambda i=i: answers.append(
                complete(port, f"story {i} about the sea", 400, ignore_eos=True)
            ),
            daemon=True,
        )
        for i in range(COMPLETIONS)
    ]
    for client in clients:
        client.start()
    for client in clients:
        client.join(300)
    assert len(answers) == COMPLETIONS
    return COMPLETIONS


def finished(count: int) -> Callable[[dict[str, Any]], bool]:
    """A scrape that counts ``count`` requests finished since the server started."""
    return lambda record: bool(record["finished_total"] == count)


def caught_in_flight(record: dict[str, Any]) -> bool:
    """A scrape with both slots running and the rest waiting for one."""
    return bool(record["running"] == 2 and record["waiting"] >= 1)


def test_headless_metrics_watch_of_an_unmodified_server(server: ApiServer, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{server.port}"
    command = [
        sys.executable,
        "-m",
        "stepview",
        *("--attach", url, "--headless", "--scrape-interval", "0.5", "--window", "3600"),
        *("--log-file", str(tmp_path / "stepview.log")),
    ]
    with watching(command) as watch:
        idle = next_record(watch, lambda r: r["state"] == "idle")
        assert idle["server"] == url and idle["model"] == "stepview-demo-tiny"
        watch.err.wait_for("--scheduler-cls stepview.engine.scheduler_plugin.StepviewScheduler")

        busy, done, sent = None, None, 0
        for _ in range(BURSTS):
            since = len(watch.out.seen)
            sent += burst(server.port)
            # Every scrape during the burst is before the one that counts all of it finished.
            done = next_record(watch, finished(sent))
            busy = next(
                (r for r in map(json.loads, watch.out.seen[since:]) if caught_in_flight(r)), None
            )
            if busy is not None:
                break
        assert busy is not None and done is not None, f"no scrape in flight in {BURSTS} bursts"
        assert busy["state"] == "running" and busy["waiting_by_reason"]["capacity"] >= 1
        assert done["finished"].get("length") == sent
        ttft = done["ttft_s"]
        assert ttft["observed"] == sent and None not in (ttft["p50"], ttft["p99"])
        assert 0 < ttft["p50"] <= ttft["p99"]
        assert done["queue_s"]["p99"] > 0  # four of them waited for a slot
        assert done["e2e_s"]["p50"] is not None and done["itl_s"]["observed"] > 0
        print(json.dumps(busy), json.dumps(done), sep="\n")  # for the record (-s)

        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(15) == 0, watch.err.rest()
