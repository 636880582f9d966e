"""Prometheus' HTTP API (``/api/v1/targets``, ``/api/v1/series``), played by a stdlib server.

Its answers are shaped exactly as Prometheus 2.42 shapes them: each active target is a copy of
one captured from the real ``/usr/bin/prometheus`` (``tests/data/prometheus/targets-2.42.json``,
scraping a file_sd job and itself) with its URL and labels changed, so a field stepview reads
is where the real server puts it. A test sets :attr:`FakePrometheus.targets` (what is listed)
and :attr:`FakePrometheus.vllm` (which of them have vLLM's series) at any time.
"""

from __future__ import annotations

import copy
import json
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.helpers import DATA

CAPTURE = DATA / "prometheus" / "targets-2.42.json"
SERIES = DATA / "prometheus" / "series-2.42.json"


def captured() -> dict[str, Any]:
    """The real answer to ``GET /api/v1/targets?state=active`` (4 targets, 2 jobs)."""
    answer: dict[str, Any] = json.loads(CAPTURE.read_text())
    return answer


@dataclass
class Listed:
    """One active target: its scrape URL, job, extra labels and health."""

    url: str
    job: str = "vllm"
    labels: dict[str, str] = field(default_factory=dict)
    health: str = "up"

    def entry(self) -> dict[str, Any]:
        """This target as Prometheus 2.42 answers it (a captured entry, changed)."""
        template = next(
            t for t in captured()["data"]["activeTargets"] if t["labels"]["job"] == "vllm"
        )
        entry = copy.deepcopy(template)
        parts = urllib.parse.urlsplit(self.url)
        labels = {"instance": parts.netloc, "job": self.job, **self.labels}
        entry["discoveredLabels"].update(
            __address__=parts.netloc,
            __metrics_path__=parts.path,
            __scheme__=parts.scheme,
            job=self.job,
            **self.labels,
        )
        entry.update(
            labels=labels,
            scrapePool=self.job,
            scrapeUrl=self.url,
            globalUrl=self.url,
            health=self.health,
            lastError="" if self.health == "up" else "connection refused",
        )
        return entry


class FakePrometheus:
    """The fake server: ``targets`` listed as active, ``vllm``: the URLs that have vLLM's
    series; ``asked``: every path asked for."""

    def __init__(self) -> None:
        self.targets: list[Listed] = []
        self.vllm: set[str] = set()
        self.asked: list[str] = []
        self.port = 0
        self._server: ThreadingHTTPServer | None = None

    @property
    def address(self) -> str:
        return f"prometheus://127.0.0.1:{self.port}"

    def answer(self, path: str) -> tuple[int, Any]:
        parts = urllib.parse.urlsplit(path)
        query = urllib.parse.parse_qs(parts.query)
        if parts.path == "/api/v1/targets" and query.get("state") == ["active"]:
            targets = [t.entry() for t in self.targets]
            return 200, {
                "status": "success",
                "data": {"activeTargets": targets, "droppedTargets": []},
            }
        if parts.path == "/api/v1/series" and query.get("match[]"):
            series = json.loads(SERIES.read_text())["data"][0]
            found = [
                {**series, "instance": t.entry()["labels"]["instance"], "job": t.job}
                for t in self.targets
                if t.url in self.vllm
            ]
            return 200, {"status": "success", "data": found}
        return 404, "404 page not found\n"

    def start(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake.asked.append(self.path)
                status, body = fake.answer(self.path)
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                kind = "text/plain; charset=utf-8" if isinstance(body, str) else "application/json"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


@pytest.fixture
def fake_prometheus() -> Iterator[FakePrometheus]:
    served = FakePrometheus()
    served.start()
    yield served
    served.stop()
