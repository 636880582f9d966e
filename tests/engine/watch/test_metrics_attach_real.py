"""``stepview --attach http://HOST:PORT --headless`` on vLLM's real API server, unmodified.

The server (the run's shared ``plain_server``, ``tests/servers.py``) runs the demo model as
vLLM ships it: no plug-in, no ``STEPVIEW_PUBLISH``, and at most two requests running
(``--max-num-seqs 2``), while six clients keep a completion each in
flight, so that four wait for a running slot. The watcher reads only the server's ``/metrics``;
its JSON lines must show the two running, the rest waiting (vLLM's reason: ``capacity``), every
completion finished, and their latency percentiles; Ctrl+C ends it normally.

The watch runs at a lower priority than the server (as it does beside a real one), so on a
busy machine one scrape can take longer than a whole batch of completions (3.2 s measured
here, and CI once missed five bursts of six in a row): the clients keep the server saturated
until a scrape has seen it so, and only then stop. The window covers the whole run.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stepview.testing.vllm_server import complete
from tests.engine.watch.attach_helpers import EXIT_S, Watch, watching
from tests.servers import Served

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]
CLIENTS = 6
TOKENS = 200


def next_record(
    watch: Watch,
    wanted: Callable[[dict[str, Any]], bool],
    timeout: float = 120,
    seen_so_far: Callable[[], str] = lambda: "",
) -> dict[str, Any]:
    """The first JSON line from now on that is ``wanted``; on a timeout, the failure says
    ``seen_so_far()`` (CI shows only the message)."""
    since = len(watch.out.seen)
    try:
        line = watch.out.wait_until(lambda text: wanted(json.loads(text)), timeout, since=since)
    except AssertionError:
        raise AssertionError(f"no such scrape in {timeout} s: {seen_so_far()}") from None
    return dict(json.loads(line))


def scrapes(watch: Watch, since: int) -> Callable[[], str]:
    """The scrapes from line ``since`` on, one ``time running/waiting finished`` each."""

    def text() -> str:
        lines = [json.loads(line) for line in watch.out.seen[since:]]
        return ", ".join(
            f"{r['time'] % 1000:.1f} {r['running']}/{r['waiting']} {r.get('finished_total')}"
            for r in lines
        )

    return text


class Clients:
    """:data:`CLIENTS` threads, each sending one completion after another until :meth:`stop`:
    the server stays saturated for as long as a scrape takes to see it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sent = 0
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(CLIENTS)
        ]
        for thread in self._threads:
            thread.start()

    def _run(self, client: int) -> None:
        while not self._stop.is_set():
            try:
                complete(self.port, f"story {client} about the sea", TOKENS, ignore_eos=True)
            except Exception as exc:  # the test reports it
                self.errors.append(exc)
                return
            with self._lock:
                self.sent += 1

    def stop(self) -> int:
        """Let each client's last completion finish; how many were answered in all."""
        self._stop.set()
        for thread in self._threads:
            thread.join(300)
        assert not self.errors, f"a completion failed: {self.errors[0]!r}"
        assert not any(thread.is_alive() for thread in self._threads), "a completion hung"
        return self.sent


def finished(count: int) -> Callable[[dict[str, Any]], bool]:
    """A scrape that counts ``count`` requests finished since the server started (the server
    is shared: other tests' requests count too)."""
    return lambda record: bool(record["finished_total"] == count)


def caught_in_flight(record: dict[str, Any]) -> bool:
    """A scrape with both slots running and the rest waiting for one."""
    return bool(record["running"] == 2 and record["waiting"] >= 1)


def test_headless_metrics_watch_of_an_unmodified_server(
    plain_server: Served, tmp_path: Path
) -> None:
    server, url = plain_server.api, plain_server.url
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

        since = len(watch.out.seen)
        clients = Clients(server.port)
        try:
            busy = next_record(
                watch, caught_in_flight, timeout=300, seen_so_far=scrapes(watch, since)
            )
        finally:
            sent = clients.stop()
        # Every scrape in flight is before the one that counts all of them finished.
        before = idle["finished_total"] or 0
        done = next_record(watch, finished(before + sent), seen_so_far=scrapes(watch, since))
        assert busy["state"] == "running" and busy["waiting_by_reason"]["capacity"] >= 1
        assert done["finished"].get("length") == sent
        ttft = done["ttft_s"]
        assert ttft["observed"] == sent and None not in (ttft["p50"], ttft["p99"])
        assert 0 < ttft["p50"] <= ttft["p99"]
        assert done["queue_s"]["p99"] > 0  # four of them waited for a slot
        assert done["e2e_s"]["p50"] is not None and done["itl_s"]["observed"] > 0
        print(json.dumps(busy), json.dumps(done), sep="\n")  # for the record (-s)

        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(EXIT_S) == 0, watch.err.rest()
