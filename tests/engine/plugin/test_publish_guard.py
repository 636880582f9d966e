"""The plug-in publishes every request's token ids: only where this machine alone can read them,
unless the server's owner says otherwise (``STEPVIEW_PUBLISH_REMOTE=1``), and then it says so."""

from __future__ import annotations

import logging
import socket

import pytest

from stepview.engine.plugin import config
from stepview.engine.plugin.config import open_sink, remote_refusal
from stepview.model.address import zmq_endpoint


@pytest.mark.parametrize(
    "address",
    [
        "tcp://127.0.0.1:5570",
        "tcp://127.1.2.3:1",
        "tcp://[::1]:5570",
        "tcp://localhost:9",
        "ipc:///tmp/x",
    ],
)
def test_loopback_and_ipc_addresses_are_private(address: str) -> None:
    assert zmq_endpoint(address).loopback
    assert remote_refusal(zmq_endpoint(address), "") is None


@pytest.mark.parametrize(
    "address", ["tcp://0.0.0.0:5570", "tcp://*:5570", "tcp://10.0.0.5:5570", "tcp://gpu-box:1"]
)
def test_an_address_others_can_reach_is_refused_unless_allowed(address: str) -> None:
    assert not zmq_endpoint(address).loopback
    refusal = remote_refusal(zmq_endpoint(address), "")
    assert refusal is not None
    assert f"not publishing on STEPVIEW_PUBLISH={address}" in refusal
    assert "STEPVIEW_PUBLISH_REMOTE=1" in refusal and "ssh -L" in refusal
    assert remote_refusal(zmq_endpoint(address), "0") is not None
    assert remote_refusal(zmq_endpoint(address), "1") is None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_plugin_stays_off_on_a_refused_bind_and_warns_on_an_allowed_one(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(config, "_local", None)
    # stepview.engine stops propagating once an engine test routed vLLM's logging to a file.
    monkeypatch.setattr(logging.getLogger("stepview.engine"), "propagate", True)
    address = f"tcp://0.0.0.0:{_free_port()}"
    monkeypatch.setenv("STEPVIEW_PUBLISH", address)
    monkeypatch.delenv("STEPVIEW_PUBLISH_REMOTE", raising=False)
    caplog.set_level(logging.INFO, logger="stepview.engine.plugin")
    assert open_sink(0) is None
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    assert "not publishing on" in caplog.records[0].getMessage()

    caplog.clear()
    monkeypatch.setenv("STEPVIEW_PUBLISH_REMOTE", "1")
    sink = open_sink(0)
    try:
        assert sink is not None
        (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert "go to anyone who can reach that address" in warning.getMessage()
    finally:
        if sink is not None:
            sink.close()
