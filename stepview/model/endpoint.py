"""The words for an HTTP endpoint stepview serves (the metrics page, the event stream): where
it is, and why it could not be bound, in one line.

Both endpoints bind their port before the engine starts, so that a port in use or a host that
does not resolve stops the run at once with the same message shape (exit 2), whichever of the
two could not be had.
"""

from __future__ import annotations

import errno
import socket

_WHY = {
    errno.EADDRINUSE: "address in use",
    errno.EADDRNOTAVAIL: "address not available on this machine",
    errno.EACCES: "permission denied (ports below 1024 need root)",
}


def netloc(host: str, port: int) -> str:
    """``host:port``, an IPv6 host in brackets (as a URL writes it)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind_problem(what: str, host: str, port: int, exc: OSError) -> str:
    """Why ``what`` (``metrics``, ``events``) cannot be served on ``host:port``, in one line."""
    why = _WHY.get(exc.errno or 0)
    if isinstance(exc, socket.gaierror):  # a host name that does not resolve
        why = f"unknown host ({exc.strerror})"
    return f"cannot serve {what} on {netloc(host, port)}: {why or exc.strerror or exc}"
