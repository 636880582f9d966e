"""A vLLM API server the benchmark did not start: ``--server URL --publish ADDRESS``.

The server benchmarks (``server_overhead``, ``long_queue``, ``watch_server_rss``) start the
servers they measure, each start ~40 s of CPU on this 2-core machine, and most of a short
run. Their smoke tests check the plumbing around the server (the load, ``stepview --attach``
in tmux, the watch's results file, the last line), not the figure, and the test suite
already runs real vLLM servers once per run (``tests/servers.py``): a smoke test hands one
in with these flags and the benchmark uses it as it is, its plug-in (if any) publishing at
``--publish``. A person can do the same to measure a server of their own on this machine
(the benchmarks speak to ``127.0.0.1``, so only a local one). The benchmark neither restarts
nor stops a given server; its figures then depend on how that server was started (its
``--max-num-seqs``, say), which the benchmark prints.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from urllib.parse import urlsplit

from stepview.testing.vllm_server import ApiServer


class GivenServer(ApiServer):
    """A running server at ``port``, used as the benchmark's own would be, never stopped:
    :meth:`start` only checks that it answers and :meth:`kill` leaves it running."""

    def __init__(self, port: int, publish: str | None) -> None:
        super().__init__([], {}, port, Path(os.devnull))
        self.publish = publish
        """Where its plug-in publishes records, if it has the plug-in."""

    def start(self) -> None:
        if not self.healthy():
            raise RuntimeError(f"no server answers /health on 127.0.0.1:{self.port}")

    def kill(self) -> None:
        """Nothing: whoever started the server stops it."""


def add_server_flags(parser: argparse.ArgumentParser, *, alone: bool = False) -> None:
    """``--server URL`` and ``--publish ADDRESS``; with ``alone``, also ``--alone-server URL``
    (a server without the plug-in, for a benchmark that measures one)."""
    parser.add_argument(
        "--server",
        metavar="URL",
        help="use this running server with stepview's plug-in (http://127.0.0.1:PORT) "
        "instead of starting one; needs --publish",
    )
    parser.add_argument("--publish", metavar="ADDRESS", help="where --server's plug-in publishes")
    if alone:
        parser.add_argument(
            "--alone-server",
            metavar="URL",
            help="use this running server without the plug-in for the 'alone' variant",
        )


def given(url: str | None, publish: str | None) -> GivenServer | None:
    """The server ``--server`` (or ``--alone-server``, with no ``publish``) names, if any."""
    if url is None:
        return None
    port = urlsplit(url).port
    if port is None:
        raise SystemExit(f"the server's URL names no port: {url}")
    return GivenServer(port, publish)


def plugged(args: argparse.Namespace) -> GivenServer | None:
    """The plug-in server ``--server`` and ``--publish`` name, if any (both or neither)."""
    if (args.server is None) != (args.publish is None):
        raise SystemExit("--server and --publish go together")
    return given(args.server, args.publish)
