"""vLLM API servers started once per test run and shared by every test that neither restarts
nor breaks its server (used by ``tests/conftest.py``).

A real API server takes ~30 s of CPU and ~1 GB to start on the tiny model; a run of the suite
used to start twelve, one per test. Here each kind of server is started once, the first time a
test asks for it, and all the kinds the collected tests will ask for are started together
then, in parallel (:class:`ServerPool`), so that the second and third start while the first
imports vLLM. Tests that use them are put in one xdist group (``servers``): one worker runs
them one after another, so no test sees another test's traffic, and the pool lives in that
worker only.

- ``plain_server``: vLLM's server as vLLM ships it (no plug-in), at most two requests running
  (``--max-num-seqs 2``, so requests wait for a slot), publishing its KV-cache events;
- ``plugged_server``: the server with stepview's scheduler plug-in publishing its records;
- ``locked_server``: the plug-in server locked two ways, ``--api-key`` on its API and CURVE
  on its records (published on every interface, allowed only because CURVE guards it);
- ``tight_server``: the plug-in server with a KV cache of 40 blocks and at most 6 requests
  running, so that a load makes requests wait and get preempted (the event stream's test).

Every test gets a server that answers ``/health``: one that an earlier test left dead is
started again, so that a later test does not fail for what another did. Tests that restart or
kill their server on purpose (the attach end to end) start their own.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from stepview.testing.vllm_server import ApiServer, free_port, server_command, server_env

SERVER_FIXTURES = frozenset({"plain_server", "plugged_server", "locked_server", "tight_server"})
"""The fixtures of shared servers: a test that uses one is put in the ``servers`` group."""
API_KEY = "sk-stepview-test-5e1f"
"""The locked server's ``--api-key``."""


@dataclass
class Served:
    """A shared server and what a test needs to reach it."""

    api: ApiServer
    publish: str | None = None
    """Where its plug-in publishes records (``tcp://…``), if it has the plug-in."""
    kv_events: str | None = None
    """Where it publishes its KV-cache events, if it does."""
    curve: dict[str, str] = field(default_factory=dict)
    """The CURVE variables of a locked server (``make_keys``' lines): the server's
    ``STEPVIEW_PUBLISH_*`` and a watch's ``STEPVIEW_ATTACH_*``."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api.port}"


def _plain(model: Path, folder: Path) -> Served:
    port, events = free_port(), free_port()
    config = {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": f"tcp://*:{events}",
        "topic": "kv",
    }
    command = [
        *server_command(model, port, plugin=False),
        *("--max-num-seqs", "2", "--kv-events-config", json.dumps(config)),
    ]
    api = ApiServer(command, server_env(None), port, folder / "plain.log")
    return Served(api, kv_events=f"tcp://127.0.0.1:{events}")


def _plugged(model: Path, folder: Path) -> Served:
    port, publish = free_port(), f"tcp://127.0.0.1:{free_port()}"
    api = ApiServer(server_command(model, port), server_env(publish), port, folder / "plug.log")
    return Served(api, publish=publish)


TIGHT_KV = "640K"
"""The tight server's KV cache: 640 tokens of the tiny model (its 512-token context and a
little more), 40 blocks."""


def _tight(model: Path, folder: Path) -> Served:
    port, publish = free_port(), f"tcp://127.0.0.1:{free_port()}"
    command = [*server_command(model, port), "--max-num-seqs", "6"]
    command[command.index("--kv-cache-memory-bytes") + 1] = TIGHT_KV
    api = ApiServer(command, server_env(publish), port, folder / "tight.log")
    return Served(api, publish=publish)


def _locked(model: Path, folder: Path) -> Served:
    from stepview.engine.records.curve import make_keys

    lines = make_keys(folder / "keys").splitlines()
    curve = dict(x.removeprefix("export ").split("=", 1) for x in lines if "=" in x)
    port, records = free_port(), free_port()
    env = server_env(f"tcp://0.0.0.0:{records}")
    env.update({k: v for k, v in curve.items() if k.startswith("STEPVIEW_PUBLISH_")})
    command = [*server_command(model, port), "--api-key", API_KEY]
    api = ApiServer(command, env, port, folder / "locked.log")
    return Served(api, publish=f"tcp://127.0.0.1:{records}", curve=curve)


_KINDS: dict[str, Callable[[Path, Path], Served]] = {
    "plain_server": _plain,
    "plugged_server": _plugged,
    "locked_server": _locked,
    "tight_server": _tight,
}


class ServerPool:
    """The shared servers of this test process: built on first use, killed at the end."""

    def __init__(self, folder: Path, wanted: frozenset[str]) -> None:
        self._folder = folder
        self._wanted = wanted
        self._served: dict[str, Served] = {}

    def get(self, kind: str) -> Served:
        """The server ``kind``, answering: started with every other kind this run will want
        (in parallel) the first time, started again if a test left it dead."""
        if kind not in self._served:
            self._start_together({kind, *self._wanted} - set(self._served))
        served = self._served[kind]
        if not served.api.healthy():
            served.api.kill()
            served.api.start()
        return served

    def _start_together(self, kinds: set[str]) -> None:
        from stepview.engine.own.tiny_model import ensure_tiny_model

        model = ensure_tiny_model()
        made = {kind: _KINDS[kind](model, self._folder) for kind in sorted(kinds)}
        failures: dict[str, BaseException] = {}

        def start(kind: str) -> None:
            try:
                made[kind].api.start()
            except BaseException as error:  # reported below, with every other failure
                failures[kind] = error

        threads = [threading.Thread(target=start, args=(kind,)) for kind in made]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            for served in made.values():
                served.api.kill()
            raise RuntimeError("; ".join(f"{k}: {e}" for k, e in failures.items()))
        self._served.update(made)

    def close(self) -> None:
        for served in self._served.values():
            served.api.kill()
        self._served.clear()


def wanted_servers(items: list[pytest.Item]) -> frozenset[str]:
    """The kinds of shared server the collected ``items`` ask for."""
    return frozenset(
        name for item in items for name in getattr(item, "fixturenames", ()) if name in _KINDS
    )


@pytest.fixture(scope="session")
def server_pool(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerPool]:
    pool = ServerPool(tmp_path_factory.mktemp("servers"), wanted_servers(request.session.items))
    yield pool
    pool.close()


@pytest.fixture
def plain_server(server_pool: ServerPool) -> Served:
    return server_pool.get("plain_server")


@pytest.fixture
def plugged_server(server_pool: ServerPool) -> Served:
    return server_pool.get("plugged_server")


@pytest.fixture
def locked_server(server_pool: ServerPool) -> Served:
    return server_pool.get("locked_server")


@pytest.fixture
def tight_server(server_pool: ServerPool) -> Served:
    return server_pool.get("tight_server")
