"""CURVE on the records' channel: a watch with an allowed key reads the records, encrypted;
a watch without keys, or with a key the server does not know, reads nothing and is told so;
a bind other machines can reach is allowed once CURVE guards it; bad key paths are one line."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest
import zmq.auth

from stepview.cli import main
from stepview.engine.plugin import config
from stepview.engine.plugin import publisher as publisher_module
from stepview.engine.plugin.config import open_sink
from stepview.engine.plugin.publisher import FactsPublisher
from stepview.engine.records.channel import ChannelState, FactsSubscriber
from stepview.engine.records.curve import (
    CLIENT_KEYS_ENV,
    SERVER_SECRET_ENV,
    WATCH_SECRET_ENV,
    WATCH_SERVER_KEY_ENV,
    CurveKeyError,
    WatchKeys,
    make_keys,
    server_keys,
    watch_keys,
)
from tests.engine.records.test_channel import _facts, _until


def _env(folder: Path) -> dict[str, str]:
    """The four variables make_keys prints, as a dict."""
    lines = make_keys(folder).splitlines()
    pairs = (line.removeprefix("export ").split("=", 1) for line in lines if "=" in line)
    return {name: value for name, value in pairs}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_make_keys_prints_the_four_variables_and_they_load(tmp_path: Path) -> None:
    env = _env(tmp_path / "keys")
    assert set(env) == {SERVER_SECRET_ENV, CLIENT_KEYS_ENV, WATCH_SECRET_ENV, WATCH_SERVER_KEY_ENV}
    server, watch = server_keys(env), watch_keys(env)
    assert server is not None and watch is not None
    assert watch.server == server.public
    assert server.secret.hex() not in repr(server) and watch.secret.hex() not in repr(watch)
    assert server_keys({}) is None and watch_keys({}) is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({SERVER_SECRET_ENV: "/nonexistent/server.key_secret"}, "no zmq certificate there"),
        ({CLIENT_KEYS_ENV: ""}, f"needs both {SERVER_SECRET_ENV} and {CLIENT_KEYS_ENV}"),
        ({WATCH_SERVER_KEY_ENV: ""}, f"needs both {WATCH_SECRET_ENV} and {WATCH_SERVER_KEY_ENV}"),
        ({WATCH_SECRET_ENV: "SERVER_PUBLIC"}, "holds no secret key"),
    ],
)
def test_a_wrong_key_variable_says_which_and_why(
    tmp_path: Path, change: dict[str, str], message: str
) -> None:
    env = _env(tmp_path / "keys")
    env.update(
        {k: env[WATCH_SERVER_KEY_ENV] if v == "SERVER_PUBLIC" else v for k, v in change.items()}
    )
    with pytest.raises(CurveKeyError, match=message):
        server_keys(env)
        watch_keys(env)


def test_only_an_allowed_watch_reads_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(publisher_module, "SUBSCRIPTION_CHECK_S", 0.0)
    env = _env(tmp_path / "keys")
    server, allowed = server_keys(env), watch_keys(env)
    assert server is not None and allowed is not None
    stranger_public, stranger_secret = zmq.auth.load_certificate(
        zmq.auth.create_certificates(str(tmp_path), "stranger")[1]
    )
    assert stranger_secret is not None
    stranger = WatchKeys(stranger_public, stranger_secret, allowed.server)
    address = f"tcp://127.0.0.1:{_port()}"
    publisher = FactsPublisher(address, keys=server)
    subscribers = [
        FactsSubscriber(address, allowed),
        FactsSubscriber(address, stranger),
        FactsSubscriber(address),  # no keys: a plain-text client
    ]
    watch, refused, plain = subscribers
    try:
        assert watch.wait_connected(10.0)
        _until(publisher.wanted)
        _until(lambda: refused.poll() == [] and refused.refused > 0)
        publisher.deliver(_facts(1))
        received: list[object] = []
        _until(lambda: bool(received.extend(watch.poll()) or received))
        assert [f.step for f in received] == [1]  # type: ignore[attr-defined]
        # The stranger was refused; neither it nor the plain client ever got through, and
        # each says why (what the attach view shows while it waits).
        _until(lambda: plain.poll() == [] and plain.refusal is not None)
        for other in (refused, plain):
            assert other.poll() == [] and other.state is ChannelState.CONNECTING
        assert refused.refusal == f"{address} refused this watch's CURVE key"
        assert plain.refusal is not None
        # Said for sure when this end read the publisher's greeting, else after a few
        # handshakes refused without a reason (mostly, on a busy machine): either names CURVE.
        assert plain.refusal.startswith(address)
        assert f"with CURVE: set {WATCH_SECRET_ENV}" in plain.refusal
        assert watch.refusal is None
    finally:
        for sub in subscribers:
            sub.close()
        publisher.close()


def test_curve_allows_a_bind_others_can_reach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(config, "_local", None)
    monkeypatch.setattr(logging.getLogger("stepview.engine"), "propagate", True)
    for name, value in _env(tmp_path / "keys").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("STEPVIEW_PUBLISH", f"tcp://0.0.0.0:{_port()}")
    monkeypatch.delenv("STEPVIEW_PUBLISH_REMOTE", raising=False)
    caplog.set_level(logging.INFO, logger="stepview.engine.plugin")
    sink = open_sink(0)
    try:
        assert sink is not None
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert any("publishing with CURVE" in r.getMessage() for r in caplog.records)
    finally:
        if sink is not None:
            sink.close()
    monkeypatch.setenv(SERVER_SECRET_ENV, str(tmp_path / "missing.key_secret"))
    caplog.clear()
    assert open_sink(0) is None
    assert "no zmq certificate there" in caplog.records[-1].getMessage()


def test_attach_with_a_wrong_key_path_stops_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(WATCH_SECRET_ENV, str(tmp_path / "nope.key_secret"))
    monkeypatch.setenv(WATCH_SERVER_KEY_ENV, str(tmp_path / "nope.key"))
    code = main(["--log-file", str(tmp_path / "log"), "--attach", "tcp://127.0.0.1:5570"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"stepview: --attach: {WATCH_SECRET_ENV}=")
