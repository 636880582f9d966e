"""``stepview --attach prometheus://HOST:PORT?job=vllm --headless``: the real Prometheus lists
two real vLLM API servers (the demo model, as vLLM ships them) from a file_sd file; stepview
watches both, each with its labels; one is stopped (its row says ``down``, stderr says so, and
it stays in the fleet: Prometheus still lists it, down) and started again on the same port
(its row comes back, its completions counted).

The server that stays up is the run's shared ``plain_server`` (``tests/servers.py``: vLLM as
it ships, started once per run, so the test runs in the ``servers`` group); the one stopped
and started again is the test's own (a shared server must not be stopped). Needs the
``prometheus`` command: without it the test fails, saying so.
"""

from __future__ import annotations

import json
import signal
import sys
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
from tests.servers import Served

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]


@pytest.fixture
def own_server(demo_model_path: Path, tmp_path: Path) -> Iterator[ApiServer]:
    """An unmodified API server on the demo model, this test's to stop; killed after."""
    port = free_port()
    command = server_command(demo_model_path, port, plugin=False)
    server = ApiServer(command, server_env(None), port, tmp_path / "server-b.log")
    try:
        server.start()
        yield server
    finally:
        server.kill()


def url(server: ApiServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def test_a_prometheus_listed_fleet_of_two_real_servers_one_restarted(
    plain_server: Served, own_server: ApiServer, tmp_path: Path
) -> None:
    a, b = plain_server.api, own_server
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
