"""``--server URL --publish ADDRESS``: a server benchmark measures a server it did not start,
and leaves it as it found it (``benchmarks/given_server.py``)."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchmarks.given_server import add_server_flags, given, plugged
from stepview.testing.vllm_server import free_port


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def answering_port() -> Iterator[int]:
    """A local HTTP server that answers ``/health``, as a running vLLM server does."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_server_flags(parser, alone=True)
    return parser.parse_args(argv)


def test_a_given_server_is_used_where_it_runs_and_never_stopped(answering_port: int) -> None:
    args = _parse("--server", f"http://127.0.0.1:{answering_port}", "--publish", "tcp://x:1")
    server = plugged(args)
    assert server is not None
    assert (server.port, server.publish) == (answering_port, "tcp://x:1")
    server.start()  # it answers: nothing to start
    server.kill()
    assert server.healthy(), "the benchmark stopped a server it did not start"


def test_a_given_server_that_does_not_answer_fails_the_start() -> None:
    server = given(f"http://127.0.0.1:{free_port()}", None)  # a port nothing listens on
    assert server is not None
    with pytest.raises(RuntimeError, match="no server answers /health"):
        server.start()


def test_server_and_publish_go_together() -> None:
    for argv in (("--server", "http://127.0.0.1:8000"), ("--publish", "tcp://127.0.0.1:1")):
        with pytest.raises(SystemExit, match="go together"):
            plugged(_parse(*argv))
    assert plugged(_parse()) is None
    with pytest.raises(SystemExit, match="names no port"):
        given("http://127.0.0.1", None)
