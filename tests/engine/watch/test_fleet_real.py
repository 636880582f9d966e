"""``stepview --attach A,B,C --headless``: two real API servers on the demo model, one
unmodified (read through its ``/metrics``), one with the plug-in (its records), and a third
``/metrics`` page that goes away, watched together. Each JSON line names its server; after a
completion on each real one, both rows have the model, tokens and a TTFT; the third stopped,
its rows say ``down``, stderr says so, and the real ones carry on.

The real servers are the run's shared ones (``tests/servers.py``: each takes ~30 s and ~1 GB
to start), which a test must not kill: the server that goes down is a stdlib HTTP server
answering a real vLLM 0.32 ``/metrics`` capture (``fake_metrics.py``), and what a watch sees
of a server going down (its connection refused) is the same for both.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stepview.testing.vllm_server import complete
from tests.engine.watch.attach_helpers import watching
from tests.engine.watch.fake_metrics import FakeMetrics
from tests.servers import Served

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]


@contextlib.contextmanager
def stopped_after(fake: FakeMetrics) -> Iterator[FakeMetrics]:
    """``fake``, stopped at the end whatever happened (stopping twice is harmless)."""
    try:
        yield fake
    finally:
        fake.stop()


def what_went_wrong(rows: dict[str, dict[str, Any]], errors: list[str], folder: Path) -> str:
    """The last rows, the watch's stderr and the end of its log, for a failure's
    message (CI shows only the message)."""
    logs = {
        name: (folder / name).read_text(errors="replace").splitlines()[-15:]
        for name in ("stepview.log",)
        if (folder / name).exists()
    }
    return json.dumps({"rows": rows, "stderr": errors, "logs": logs}, indent=1)


def test_a_fleet_of_an_unmodified_and_a_plugged_server(
    plain_server: Served, plugged_server: Served, tmp_path: Path
) -> None:
    plain, plugged, leaving = plain_server.api, plugged_server.api, FakeMetrics()
    url, publish = plain_server.url, plugged_server.publish
    assert publish is not None
    leaving.start()
    command = [
        sys.executable,
        "-m",
        "stepview",
        *("--attach", f"{url},{publish},{leaving.url}", "--headless", "--scrape-interval", "0.5"),
        *("--log-file", str(tmp_path / "stepview.log")),
    ]
    with watching(command) as watch, stopped_after(leaving):
        rows: dict[str, dict[str, Any]] = {}

        def both_answered(text: str) -> bool:
            """Each line updates its server's row: both real rows have a model and a TTFT."""
            record = json.loads(text)
            if record["address"] != leaving.url:
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
        for row in rows.values():  # when its figures were read: a moment before the line
            assert row["read_at"] is not None and 0 <= row["time"] - row["read_at"] < 30, row

        leaving.stop()

        def down(text: str) -> bool:
            record = json.loads(text)
            return bool(record["address"] == leaving.url and record["state"] == "down")

        first = json.loads(watch.out.wait_until(down, timeout=60, since=len(watch.out.seen)))
        again = json.loads(watch.out.wait_until(down, since=len(watch.out.seen)))
        # Down, its row keeps the moment of its last read: its figures are that old.
        assert first["read_at"] is not None and first["read_at"] == again["read_at"]
        assert again["time"] > again["read_at"]
        watch.err.wait_for(f"DISCONNECTED from {leaving.url}")
        for address in (url, publish):  # the real ones carry on
            later = watch.out.wait_until(
                lambda text, a=address: json.loads(text)["address"] == a,  # type: ignore[misc]
                since=len(watch.out.seen),
            )
            assert json.loads(later)["state"] in ("idle", "running")
