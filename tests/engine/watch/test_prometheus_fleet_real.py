"""``stepview --attach prometheus://HOST:PORT?job=vllm --headless``: the real Prometheus lists
two real vLLM API servers (the demo model, as vLLM ships them) from a file_sd file; stepview
watches both, each with its labels; one is stopped (its row says ``down``, stderr says so, and
it stays in the fleet: Prometheus still lists it, down) and started again on the same port
(its row comes back, its completions counted).

Both servers are this test's own (the shared ones of ``tests/servers.py`` must not be
stopped): two starts of ~30 s and ~1 GB each, hence ``heavy``. Needs the ``prometheus``
command: without it the test fails, saying so.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from stepview.testing.vllm_server import (
    MODEL_NAME,
    ApiServer,
    complete,
    free_port,
    server_command,
    server_env,
)
from tests.engine.watch.attach_helpers import EXIT_S, round_of, watching
from tests.engine.watch.real_prometheus import running_prometheus, write_targets

pytestmark = [pytest.mark.engine, pytest.mark.heavy, pytest.mark.timeout(900)]


@pytest.fixture
def two_servers(demo_model_path: Path, tmp_path: Path) -> Iterator[list[ApiServer]]:
    """Two unmodified API servers on the demo model, started side by side; killed after."""
    servers = []
    for name in "ab":
        port = free_port()
        command = server_command(demo_model_path, port, plugin=False)
        servers.append(ApiServer(command, server_env(None), port, tmp_path / f"server-{name}.log"))
    problems: list[BaseException] = []

    def start(server: ApiServer) -> None:
        try:
            server.start()
        except BaseException as exc:  # said below, in the test's thread
            problems.append(exc)

    threads = [threading.Thread(target=start, args=(s,)) for s in servers]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if problems:
            raise problems[0]
        yield servers
    finally:
        for server in servers:
            server.kill()


def url(server: ApiServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def test_a_prometheus_listed_fleet_of_two_real_servers_one_restarted(
    two_servers: list[ApiServer], tmp_path: Path
) -> None:
    a, b = two_servers
    targets = tmp_path / "targets.json"
    write_targets(
        targets,
        [
            {"targets": [f"127.0.0.1:{a.port}"], "labels": {"replica": "a"}},
            {"targets": [f"127.0.0.1:{b.port}"], "labels": {"replica": "b"}},
        ],
    )
    with running_prometheus(tmp_path, {"vllm": targets}) as prometheus:
        address = f"prometheus://{prometheus}?job=vllm"
        command = [
            *(sys.executable, "-m", "stepview", "--attach", address, "--headless"),
            *("--scrape-interval", "0.5", "--log-file", str(tmp_path / "stepview.log")),
        ]
        with watching(command) as watch:
            for server in (a, b):
                watch.err.wait_for(f"{url(server)} joined (listed by {address}: ", timeout=60)
            for server in (a, b):
                complete(server.port, "a story about the sea", 16, ignore_eos=True)
            up = ("idle", "running")
            rows = round_of(watch, {url(a), url(b)}, lambda r: r["state"] in up, timeout=60)
            for server, replica in ((a, "a"), (b, "b")):
                row = rows[url(server)]
                assert row["model"] == MODEL_NAME and row["state"] in ("idle", "running")
                assert row["labels"] == {
                    "instance": f"127.0.0.1:{server.port}",
                    "job": "vllm",
                    "replica": replica,
                }

            b.kill()  # stopped: down, and still listed (Prometheus lists it, down)
            watch.err.wait_for(f"DISCONNECTED from {url(b)}", timeout=60)
            down = round_of(
                watch,
                {url(a), url(b)},
                lambda r: r["address"] == url(a) or r["state"] == "down",
                since=len(watch.out.seen),
            )
            assert down[url(a)]["state"] in up
            assert f"{url(b)} left" not in "".join(watch.err.seen)

            b.start()  # again, on the same port
            watch.err.wait_for(f"back in touch with {url(b)}", timeout=120)
            seen = len(watch.out.seen)

            def b_answered(text: str) -> bool:
                record = json.loads(text)
                return record["address"] == url(b) and record["ttft_p50_s"] is not None

            answered = False
            for _ in range(10):  # a completion after the restart, seen in b's window
                complete(b.port, "another story", 16, ignore_eos=True)
                try:
                    watch.out.wait_until(b_answered, timeout=10, since=seen)
                except AssertionError:
                    continue
                answered = True
                break
            assert answered, "no TTFT in b's rows after its restart"
            back = round_of(
                watch, {url(a), url(b)}, lambda r: r["state"] in up, timeout=60, since=seen
            )
            assert back[url(b)]["labels"]["replica"] == "b"
            assert back[url(b)]["model"] == MODEL_NAME
            watch.child.send_signal(signal.SIGINT)
            assert watch.child.wait(EXIT_S) == 0
