"""A watch starved on purpose beside a real API server loses no request.

vLLM's API server with stepview's plug-in serves a burst of short completions while the
``stepview --attach --headless --results`` watching it is stopped (``SIGSTOP``) for longer than
the heartbeats keep its link: the plug-in drops it, builds no record while nobody listens,
and logs the ends on. The watch that comes back asks the log for them, from a core by then
idle (the plug-in's stack watch answers for it): the requests in its results file are the
requests the client completed, each once, and none is counted unseen.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from stepview.engine.watch.link.adopting import short_id
from stepview.testing.vllm_server import ROOT, complete
from tests.engine.watch.attach_helpers import result_ids, watch_command, watching
from tests.servers import Served

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

STOPPED_S = 5.0  # past the heartbeats' 3 s: the server's plug-in drops the stopped watch


def test_a_watch_stopped_during_a_burst_has_every_request_the_client_completed(
    plugged_server: Served, tmp_path: Path
) -> None:
    assert plugged_server.publish is not None
    port = plugged_server.api.port
    results = tmp_path / "results.jsonl"
    completed: list[str] = []  # the watch's ids of the requests the client completed
    lock = threading.Lock()

    def one(i: int) -> None:
        answer = complete(port, f"Number {i} is", 6)
        with lock:  # the server's client id "cmpl-<hex>-0", as the watch names it
            completed.append(short_id(f"{answer['id']}-0"))

    def until(condition: object, what: str, timeout: float = 120.0, kick: bool = False) -> None:
        """Poll the watch's results file (another process's doing) until ``condition()``;
        ``kick``: a request sent now and then (for a first result)."""
        assert callable(condition)
        deadline = time.monotonic() + timeout
        kick_at = time.monotonic() + (2.0 if kick else timeout)
        while not condition():
            now = time.monotonic()
            assert now < deadline, f"{what}: {len(result_ids(results))} written"
            if now >= kick_at:
                one(10_000 + int(now))
                kick_at = now + 2.0
            time.sleep(0.1)  # polling a file another process writes: nothing to wait on

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [*watch_command(plugged_server.publish, tmp_path), "--results", str(results)]
    with watching(command, env) as watch:
        watch.err.wait_for("stepview: watching", timeout=60)
        until(lambda: bool(result_ids(results)), "the watch never wrote a result", kick=True)
        watch.child.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(one, range(48)))
            i = 48
            while time.monotonic() < stopped + STOPPED_S:  # (more requests while it lasts)
                one(i)
                i += 1
        finally:
            watch.child.send_signal(signal.SIGCONT)
        # No request comes after the burst: the core is idle when the watch asks.
        until(lambda: set(completed) <= set(result_ids(results)), "requests missing", 60.0)
        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(60) == 0
        stderr = watch.err.rest()
    written = result_ids(results)
    assert len(written) == len(set(written))  # each once
    assert set(written) == set(completed)  # every request the client completed, nothing else
    assert not [line for line in stderr if "unseen" in line], stderr
    caught = [x for x in (tmp_path / "stepview.log").read_text().splitlines() if "caught up" in x]
    assert caught  # (the link did drop, and the log was asked)
