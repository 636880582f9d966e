"""The event stream of a real vLLM API server, read as programs would read it.

vLLM's API server with stepview's plug-in and a KV cache of 40 blocks (``tight_server``)
takes a load that makes requests wait and get preempted, while ``stepview --attach …
--headless --events http://127.0.0.1:0 --events FILE`` watches it and real readers follow the
stream: ``curl -N``, an httpx stream from the start of the buffer, one killed mid-stream and
back with ``Last-Event-ID``, and a socket that reads nothing at all. Every request of the load
arrives and ends once, in order; every event fits the shipped schema; the waiting reasons are
the results file's; the stream and the file say the same; the reader that came back missed
nothing; the one that read nothing was dropped (counted in ``/metrics``) while the others
stayed complete.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from stepview.testing.vllm_server import ROOT, complete
from tests.engine.watch.attach_helpers import watch_command, watching
from tests.events.checks import (
    check_lives,
    reasons_by_request,
    reasons_of_result,
    validate_all,
)
from tests.events.sse_reader import StreamReader
from tests.servers import Served

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

QUEUE = 200  # --events-queue: the reader that reads nothing is closed after losing this many
LOAD = 24


def _metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url, timeout=10) as page:
        text = page.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def _load(port: int, first: int, count: int) -> list[str]:
    """``count`` completions at once, long enough to fill the tight KV cache; their client
    ids as the plug-in's records give them (vLLM's ``cmpl-…`` id and the sample)."""

    def one(i: int) -> str:
        prompt = f"Request {i}: " + "tell me more " * 12
        return f"{complete(port, prompt, 100, ignore_eos=True)['id']}-0"

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(first, first + count)))


def test_programs_follow_a_real_server_through_waits_and_preemptions(
    tight_server: Served, tmp_path: Path
) -> None:
    assert tight_server.publish is not None
    port = tight_server.api.port
    events_file = tmp_path / "events.jsonl"
    results = tmp_path / "results.jsonl"
    command = [
        *watch_command(tight_server.publish, tmp_path),
        *("--results", str(results), "--metrics-port", "0"),
        *("--events", "http://127.0.0.1:0", "--events", str(events_file)),
        *("--events-step-rate", "all", "--events-queue", str(QUEUE)),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with watching(command, env) as watch:
        url = watch.err.wait_for("serving events at", timeout=60).rsplit(" ", 1)[1]
        metrics = watch.err.wait_for("serving metrics at", timeout=60).rsplit(" ", 1)[1]
        watch.err.wait_for("stepview: watching", timeout=120)
        whole = StreamReader(url, last_id=0)
        killed = StreamReader(url, last_id=0)
        curl = subprocess.Popen(
            ["curl", "-sN", url], stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
        )
        curl_lines: list[str] = []
        assert curl.stdout is not None
        curl_reader = threading.Thread(target=lambda: curl_lines.extend(curl.stdout or []))
        curl_reader.start()
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        host, _, rest = url.removeprefix("http://").partition(":")
        stuck.connect((host, int(rest.split("/")[0])))
        stuck.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 0\r\n\r\n")

        client_ids = _load(port, 0, LOAD // 2)
        # Killed mid-stream: it comes back from the last event it had.
        killed.wait_until(lambda events: len(events) > 50)
        killed.stop()
        killed.ended.wait(30)
        came_back = StreamReader(url, last_id=killed.ids[-1])
        client_ids += _load(port, LOAD // 2, LOAD // 2)
        # Until the reader that reads nothing has lost a queue's worth (which closes it):
        # more load drives the stream; stepview's /metrics counts it.
        extra = LOAD
        while _metric(metrics, "stepview_events_dropped_total") < QUEUE:
            client_ids += _load(port, extra, 4)
            extra += 4
            assert extra < 400, "the reader that reads nothing was never dropped"
        ended = {f"{c}" for c in client_ids}

        def all_finished(events: list[tuple[int | None, dict[str, object]]]) -> bool:
            arrived = {e["id"]: e["client_id"] for _, e in events if e["event"] == "arrived"}
            done = {arrived.get(e["id"]) for _, e in events if e["event"] == "finished"}
            return ended <= done

        whole.wait_until(all_finished, timeout=120)
        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(60) == 0
        for reader in (whole, came_back):
            assert reader.ended.wait(30)
        curl.wait(30)
        curl_reader.join(30)

    written = [json.loads(line) for line in events_file.read_text().splitlines()]
    streamed = [event for _, event in whole.events]
    # The stream from its start and the file: the same events, numbered 1, 2, 3...
    assert streamed == written
    assert whole.ids == list(range(1, len(written) + 1))
    assert validate_all(written) == len(written)
    check_lives(written)
    arrived = {e["client_id"]: e["id"] for e in written if e["event"] == "arrived"}
    assert ended <= set(arrived)
    finished = [e["id"] for e in written if e["event"] == "finished"]
    assert all(finished.count(arrived[c]) == 1 for c in ended)
    kinds = {e["event"] for e in written}
    assert {"waiting", "preempted", "resumed", "scheduled", "first_token", "step"} <= kinds
    assert all(e["server"] == tight_server.publish for e in written)
    # Waiting reasons: as the results file's timelines say.
    said = reasons_by_request(written)
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(records) == len({e["id"] for e in written if e["event"] == "arrived"})
    for record in records:
        assert said.get(record["id"], []) == reasons_of_result(record), record["id"]
    # Killed and back with Last-Event-ID: nothing missed in between.
    assert came_back.ids[0] == killed.ids[-1] + 1
    assert killed.ids + came_back.ids == list(range(1, len(written) + 1))
    # curl -N: from where it joined to the end, every number.
    curl_ids = [int(line[4:]) for line in curl_lines if line.startswith("id: ")]
    assert curl_ids and curl_ids == list(range(curl_ids[0], len(written) + 1))
    # The reader that read nothing: closed by the server, its loss counted; nobody else lost.
    stuck.settimeout(30)
    try:
        while stuck.recv(65536):
            pass
    except ConnectionResetError:
        pass
    stuck.close()
    for reader in (whole, came_back):
        assert all(e["event"] != "dropped" for _, e in reader.events)
