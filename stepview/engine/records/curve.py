"""zmq's CURVE on the records' channel: encrypted, and only for the watches the server's owner
allows, so a watch from another machine needs no ssh tunnel.

The records carry every request's token ids. Over plain TCP the plug-in therefore binds only
where this machine alone can reach it (:func:`stepview.engine.plugin.config.remote_refusal`).
With CURVE (ZMTP's CurveZMQ: Curve25519 keys, every message encrypted) the server proves who
it is to the watch and each watch proves who it is to the server, which lets in only the
public keys in a folder of the owner's (ZAP, through pyzmq's :class:`ThreadAuthenticator`).

Keys are zmq's own certificate files (``zmq.auth.create_certificates``), named by variables:

* on the server: ``STEPVIEW_PUBLISH_SECRET_KEY`` (the server's ``*.key_secret``) and
  ``STEPVIEW_PUBLISH_CLIENT_KEYS`` (a folder of the public ``*.key`` files of the watches
  allowed in);
* where stepview watches: ``STEPVIEW_ATTACH_SECRET_KEY`` (the watch's own ``*.key_secret``)
  and ``STEPVIEW_ATTACH_SERVER_KEY`` (the server's public ``*.key``).

``python -m stepview.engine.records.curve DIR`` makes one pair for a server and one for a
watch and prints the four lines to set. Nothing here imports vLLM.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

SERVER_SECRET_ENV = "STEPVIEW_PUBLISH_SECRET_KEY"
CLIENT_KEYS_ENV = "STEPVIEW_PUBLISH_CLIENT_KEYS"
WATCH_SECRET_ENV = "STEPVIEW_ATTACH_SECRET_KEY"
WATCH_SERVER_KEY_ENV = "STEPVIEW_ATTACH_SERVER_KEY"


class CurveKeyError(Exception):
    """A key variable names a file or folder that is missing or holds no key of that kind."""


@dataclass(frozen=True, slots=True)
class ServerKeys:
    """The publisher's key pair and the folder of the watches' public keys it lets in."""

    public: bytes = field(repr=False)
    secret: bytes = field(repr=False)
    clients: Path


@dataclass(frozen=True, slots=True)
class WatchKeys:
    """A watch's own key pair and the server's public key it expects."""

    public: bytes = field(repr=False)
    secret: bytes = field(repr=False)
    server: bytes = field(repr=False)


def _pair(variable: str, path: str) -> tuple[bytes, bytes]:
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise CurveKeyError(f"{variable}={path}: no zmq certificate there ({exc})") from exc
    if not public or not secret:
        raise CurveKeyError(f"{variable}={path} holds no secret key (a *.key_secret file)")
    return public, secret


def _public(variable: str, path: str) -> bytes:
    try:
        public, _ = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise CurveKeyError(f"{variable}={path}: no zmq certificate there ({exc})") from exc
    if not public:
        raise CurveKeyError(f"{variable}={path} holds no public key")
    return public


def server_keys(environ: Mapping[str, str] | None = None) -> ServerKeys | None:
    """The publisher's CURVE keys from its variables; ``None`` when neither is set."""
    env = os.environ if environ is None else environ
    secret_path = env.get(SERVER_SECRET_ENV, "").strip()
    clients = env.get(CLIENT_KEYS_ENV, "").strip()
    if not secret_path and not clients:
        return None
    if not secret_path or not clients:
        raise CurveKeyError(f"CURVE needs both {SERVER_SECRET_ENV} and {CLIENT_KEYS_ENV}")
    if not Path(clients).is_dir() or not any(Path(clients).glob("*.key")):
        raise CurveKeyError(f"{CLIENT_KEYS_ENV}={clients} is no folder of public *.key files")
    public, secret = _pair(SERVER_SECRET_ENV, secret_path)
    return ServerKeys(public, secret, Path(clients))


def watch_keys(environ: Mapping[str, str] | None = None) -> WatchKeys | None:
    """A watch's CURVE keys from its variables; ``None`` when neither is set."""
    env = os.environ if environ is None else environ
    secret_path = env.get(WATCH_SECRET_ENV, "").strip()
    server_path = env.get(WATCH_SERVER_KEY_ENV, "").strip()
    if not secret_path and not server_path:
        return None
    if not secret_path or not server_path:
        raise CurveKeyError(f"CURVE needs both {WATCH_SECRET_ENV} and {WATCH_SERVER_KEY_ENV}")
    public, secret = _pair(WATCH_SECRET_ENV, secret_path)
    return WatchKeys(public, secret, _public(WATCH_SERVER_KEY_ENV, server_path))


def secure_publisher(
    sock: zmq.Socket[bytes], context: zmq.Context[zmq.Socket[bytes]], keys: ServerKeys
) -> ThreadAuthenticator:
    """Make ``sock`` (not bound yet) a CURVE server that lets in ``keys.clients`` only.

    The authenticator answers zmq's ZAP requests on a thread of its own, once per connection
    (never per record); stop it after closing the socket.
    """
    auth = ThreadAuthenticator(context)
    auth.start()
    auth.configure_curve(domain="*", location=str(keys.clients))
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.curve_server = True
    return auth


def secure_subscriber(sock: zmq.Socket[bytes], keys: WatchKeys) -> None:
    """Make ``sock`` (not connected yet) a CURVE client of the server whose key it holds."""
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.curve_serverkey = keys.server


def make_keys(folder: Path) -> str:
    """A key pair for a server and one for a watch in ``folder``; the lines to set."""
    folder.mkdir(parents=True, exist_ok=True)
    clients = folder / "watches"
    clients.mkdir(exist_ok=True)
    _, server_secret = zmq.auth.create_certificates(str(folder), "server")
    watch_public, watch_secret = zmq.auth.create_certificates(str(folder), "watch")
    Path(watch_public).replace(clients / Path(watch_public).name)
    return "\n".join(
        (
            "# on the server (keep server.key_secret there only):",
            f"export {SERVER_SECRET_ENV}={Path(server_secret).resolve()}",
            f"export {CLIENT_KEYS_ENV}={clients.resolve()}",
            "# where stepview watches (copy watch.key_secret and server.key there):",
            f"export {WATCH_SECRET_ENV}={Path(watch_secret).resolve()}",
            f"export {WATCH_SERVER_KEY_ENV}={(folder / 'server.key').resolve()}",
        )
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m stepview.engine.records.curve DIR")
    print(make_keys(Path(sys.argv[1])))
