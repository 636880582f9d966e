"""``stepview --attach A --attach B --headless``: two real API servers on the demo model, one
unmodified (read through its ``/metrics``), one with the plug-in (its records), watched
together. Each JSON line names its server; after a completion on each, both rows have the
model, tokens and a TTFT; the unmodified one killed, its rows say ``down`` and stderr says so.
(Both servers in one test: each takes ~30 s and ~1 GB to start.)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stepview.testing.vllm_server import ApiServer, complete, free_port, server_command, server_env
from tests.engine.watch.attach_helpers import watching

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[ApiServer, ApiServer]]:
    from stepview.engine.own.tiny_model import ensure_tiny_model

    model = ensure_tiny_model()
    port, published = free_port(), free_port()
    plain = ApiServer(
        server_command(model, port, plugin=False), server_env(None), port, tmp_path / "plain.log"
    )
    publish = f"tcp://127.0.0.1:{free_port()}"
    plugged = ApiServer(
        server_command(model, published), server_env(publish), published, tmp_path / "plug.log"
    )
    try:
        plain.start()
        plugged.start()
        yield plain, plugged
    finally:
        plain.kill()
        plugged.kill()


def what_went_wrong(rows: dict[str, dict[str, Any]], errors: list[str], folder: Path) -> str:
    """The last rows, the watch's stderr and the ends of the three logs, for a failure's
    message (CI shows only the message)."""
    logs = {
        name: (folder / name).read_text(errors="replace").splitlines()[-15:]
        for name in ("plain.log", "plug.log", "stepview.log")
        if (folder / name).exists()
    }
    return json.dumps({"rows": rows, "stderr": errors, "logs": logs}, indent=1)


def test_a_fleet_of_an_unmodified_and_a_plugged_server(
    servers: tuple[ApiServer, ApiServer], tmp_path: Path
) -> None:
    plain, plugged = servers
    url, publish = f"http://127.0.0.1:{plain.port}", plugged.env["STEPVIEW_PUBLISH"]
    command = [
        sys.executable,
        "-m",
        "stepview",
        *("--attach", f"{url},{publish}", "--headless", "--scrape-interval", "0.5"),
        *("--log-file", str(tmp_path / "stepview.log")),
    ]
    with watching(command) as watch:
        rows: dict[str, dict[str, Any]] = {}

        def both_answered(text: str) -> bool:
            """Each line updates its server's row: both rows have a model and a TTFT."""
            record = json.loads(text)
            rows[record["address"]] = record
            return len(rows) == 2 and all(r["ttft_p50_s"] for r in rows.values())

        # Completions until both watches have seen one: the /metrics window starts at the
        # first scrape, and zmq drops what is published before the watch has subscribed.
        for _ in range(10):
            for port in (plain.port, plugged.port):
                complete(port, "a story about the sea", 32, ignore_eos=True)
            try:
                watch.out.wait_until(both_answered, timeout=10, since=len(watch.out.seen))
                break
            except AssertionError:
                continue
        assert len(rows) == 2 and all(r["ttft_p50_s"] for r in rows.values()), what_went_wrong(
            rows, watch.err.rest(timeout=0), tmp_path
        )
        assert {r["address"] for r in rows.values()} == {url, publish}
        assert rows[url]["per_request"] is False and rows[publish]["per_request"] is True
        assert rows[url]["model"] == "stepview-demo-tiny"  # the plug-in's needs its API
        assert all(r["state"] in ("idle", "running") for r in rows.values())

        plain.kill()
        watch.out.wait_until(
            lambda text: json.loads(text)["address"] == url and json.loads(text)["state"] == "down",
            timeout=60,
            since=len(watch.out.seen),
        )
        watch.err.wait_for(f"DISCONNECTED from {url}")
        later = watch.out.wait_until(
            lambda text: json.loads(text)["address"] == publish, since=len(watch.out.seen)
        )
        assert json.loads(later)["state"] in ("idle", "running")  # the other one carries on
