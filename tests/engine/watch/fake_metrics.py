"""A vLLM server's ``/metrics`` (and ``/v1/models``), played by a stdlib HTTP server.

The pages are real vLLM 0.32 captures (``tests/data/metrics``: the demo model's API server,
idle, with 40 completions running, and after they finished; and one started with
``--data-parallel-size 2``, 150 running), or any text a test sets.
``stop()`` and ``start()`` play a server that goes away and comes back on the same port.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.helpers import DATA

MODEL = "stepview-demo-tiny"
ROOT = "/models/demo-tiny"


def capture(name: str) -> str:
    """A captured page: ``idle``, ``busy``, ``after`` or ``dp2-busy``."""
    return (DATA / "metrics" / f"vllm-0.32-{name}.txt").read_text()


def without(page: str, *names: str) -> str:
    """``page`` without the series (and their HELP/TYPE lines) named: an older vLLM's."""
    return "".join(
        line for line in page.splitlines(keepends=True) if not any(n in line for n in names)
    )


class FakeMetrics:
    """The server; ``page``: what ``/metrics`` answers; ``api_key``: wanted on every route;
    ``authorizations``: each call's Authorization header."""

    def __init__(self, page: str = "") -> None:
        self.page = page or capture("idle")
        self.api_key: str | None = None
        self.authorizations: list[str | None] = []
        self.port = 0
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                given = self.headers.get("Authorization")
                fake.authorizations.append(given)
                if fake.api_key is not None and given != f"Bearer {fake.api_key}":
                    self._answer(401, b'{"error": "Unauthorized"}', "application/json")
                elif self.path == "/metrics":
                    self._answer(200, fake.page.encode(), "text/plain; version=0.0.4")
                elif self.path == "/v1/models":
                    models = {"data": [{"id": MODEL, "root": ROOT, "max_model_len": 512}]}
                    self._answer(200, json.dumps(models).encode(), "application/json")
                elif self.path == "/version":
                    self._answer(200, b'{"version": "0.32.0"}', "application/json")
                else:
                    self._answer(404, b'{"detail": "Not Found"}', "application/json")

            def _answer(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        ThreadingHTTPServer.allow_reuse_address = True
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
def fake_metrics() -> Iterator[FakeMetrics]:
    """A vLLM server's /metrics (a real capture) played by a local HTTP server."""
    served = FakeMetrics()
    served.start()
    yield served
    served.stop()
