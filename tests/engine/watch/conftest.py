"""Fixtures shared by the attached-engine tests: a fake plug-in publisher on an ipc socket,
an attached engine subscribed to it on a test's clock, fakes of vLLM's OpenAI-compatible API
(``--api``) and of Prometheus' (``--attach prometheus://``). A test module that needs its
engine built otherwise defines its own ``engine`` fixture, which takes precedence over this
one."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from stepview.engine.watch.api.server_api import ServerApi
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.model.address import plugin_records
from tests.engine.watch.attach_helpers import Clock, Server, ipc_address
from tests.engine.watch.fake_api import FakeApi
from tests.engine.watch.fake_prometheus import fake_prometheus

__all__ = ["fake_prometheus"]  # a fixture, found by pytest here


@pytest.fixture
def caplog(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> pytest.LogCaptureFixture:
    """pytest's ``caplog``, also seeing ``stepview.engine``'s records: that logger stops
    propagating to the root once vLLM's logging is routed to a file (the engine tests'
    conftest does so when collected)."""
    monkeypatch.setattr(logging.getLogger("stepview.engine"), "propagate", True)
    return caplog


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A publisher playing an engine core's plug-in; killed after the test."""
    s = Server(ipc_address(tmp_path))
    yield s
    s.kill()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(server: Server, clock: Clock) -> Iterator[AttachedEngine]:
    e = AttachedEngine(plugin_records(server.address), clock=clock)
    server.wait_subscribed()
    yield e
    e.shutdown()


@pytest.fixture
def fake_api() -> Iterator[FakeApi]:
    """vLLM's API played by a local HTTP server; closed after the test."""
    api = FakeApi()
    yield api
    api.close()


@pytest.fixture
def api(fake_api: FakeApi) -> ServerApi:
    return ServerApi(fake_api.url + "/v1/")
