"""What an address names, as a value: parsed once, where it is read, and never looked at again.

``--attach`` names a server watched through the plug-in's records (``tcp://HOST:PORT``,
``ipc://PATH``, with its data-parallel ranks), through its ``/metrics`` page alone
(``http(s)://HOST:PORT[/PREFIX]``), or a Prometheus server that lists the servers
(``prometheus://HOST:PORT[?job=NAME]``, a :class:`~stepview.model.targets.Discovery`); inside
a server, the plug-in reads where to publish from ``STEPVIEW_PUBLISH``; ``--kv-events`` names
vLLM's KV-event publisher. Each of those strings is turned into one of the types here by the
command line (or, for ``STEPVIEW_PUBLISH``, by the plug-in as it starts), and everything past
that point asks the value what it is (``endpoint.tcp``, ``isinstance(target, MetricsUrl)``):
no other module tells an address's kind from its text (``tests/model/test_address.py``
greps the tree for it). A value that cannot be used is a :class:`ValueError` whose message
is the one-line reason, the words the launchers always printed.

This is plain data (the plug-in imports it inside vLLM's engine core): no zmq, no sockets.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from dataclasses import dataclass

FILE_SD, PROMETHEUS = "file_sd", "prometheus"
"""The kinds of :class:`Discovery`."""
TCP, IPC = "tcp", "ipc"
"""The zmq transports a record channel may use."""
PROMETHEUS_SCHEME = "prometheus://"
PROMETHEUS_PORT = 9090
"""Prometheus' own port, when ``prometheus://HOST`` names none."""


@dataclass(frozen=True, slots=True)
class ZmqEndpoint:
    """A zmq endpoint: ``tcp://HOST:PORT`` (``host``, ``port``) or ``ipc://PATH`` (``path``)."""

    transport: str
    host: str = ""
    port: int = 0
    path: str = ""

    @property
    def text(self) -> str:
        """The endpoint as zmq (and the user) writes it."""
        if self.transport == TCP:
            return f"tcp://{self.host}:{self.port}"
        return f"ipc://{self.path}"

    def __str__(self) -> str:
        return self.text

    @property
    def tcp(self) -> bool:
        """Over the network (CURVE keys apply), not a file on this machine."""
        return self.transport == TCP

    @property
    def loopback(self) -> bool:
        """Only this machine can reach it: ``ipc://`` (a file, guarded by its permissions)
        or ``tcp://`` on a loopback host (``127.x``, ``[::1]``, ``localhost``)."""
        if not self.tcp:
            return True
        host = self.host.strip("[]")
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False  # a name, ``*`` or ``0.0.0.0``: other machines may reach it

    def for_rank(self, rank: int) -> ZmqEndpoint:
        """Where data-parallel rank ``rank`` publishes, this being rank 0's: ``r`` added to
        a TCP port, ``_dp<r>`` appended to an ipc path (vLLM's own rule for its KV-event
        publisher, extended to ipc). ``ValueError`` past the last port."""
        if rank == 0:
            return self
        if not self.tcp:
            return ZmqEndpoint(IPC, path=f"{self.path}_dp{rank}")
        port = self.port + rank
        if port > 65535:
            raise ValueError(f"'tcp://{self.host}:{port}' needs a host and a port: tcp://HOST:PORT")
        return ZmqEndpoint(TCP, self.host, port)


def zmq_endpoint(text: str) -> ZmqEndpoint:
    """``text`` as a :class:`ZmqEndpoint`; ``ValueError`` saying what to write instead."""
    scheme, sep, rest = text.partition("://")
    if not sep or scheme not in (TCP, IPC) or not rest:
        raise ValueError(
            f"{text!r} is not a tcp://HOST:PORT or ipc://PATH address "
            "(or a server's own http://HOST:PORT, to read its /metrics)"
        )
    if scheme == IPC:
        return ZmqEndpoint(IPC, path=rest)
    host, colon, port = rest.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} needs a host and a port: tcp://HOST:PORT")
    return ZmqEndpoint(TCP, host, int(port))


def kv_events_endpoint(text: str) -> ZmqEndpoint:
    """``--kv-events``: vLLM's KV-event publisher, a :class:`ZmqEndpoint`."""
    try:
        return zmq_endpoint(text)
    except ValueError:
        raise ValueError(
            f"a KV event address is tcp://HOST:PORT or ipc://PATH, not {text!r}"
        ) from None


@dataclass(frozen=True, slots=True)
class PluginRecords:
    """A server publishing the plug-in's records at ``base`` (its ``STEPVIEW_PUBLISH``),
    watched on data-parallel ``ranks`` (each at :meth:`ZmqEndpoint.for_rank`)."""

    base: ZmqEndpoint
    ranks: tuple[int, ...] = (0,)

    @property
    def text(self) -> str:
        return self.base.text

    def endpoints(self) -> tuple[tuple[int, ZmqEndpoint], ...]:
        """Each rank watched and where it publishes (checked when this value was made)."""
        return tuple((rank, self.base.for_rank(rank)) for rank in self.ranks)


@dataclass(frozen=True, slots=True)
class MetricsUrl:
    """A server watched through its ``/metrics`` page alone, at ``url`` (``http(s)://``)."""

    url: str

    @property
    def text(self) -> str:
        return self.url


WatchAddress = PluginRecords | MetricsUrl
"""One server a watch reads: the plug-in's records, or the ``/metrics`` page."""


@dataclass(frozen=True, slots=True)
class Discovery:
    """Where a fleet's servers are listed, followed while the fleet is watched.

    ``kind`` :data:`FILE_SD`: ``location`` is the file's path (an ``--attach-file`` in
    Prometheus' file_sd format). :data:`PROMETHEUS`: ``location`` is the Prometheus server's
    base URL (``http://HOST:PORT[/PREFIX]``), ``jobs`` the jobs whose targets are taken (none:
    every target that has vLLM's series). ``name`` is how the command line said it, which
    every message about it repeats.
    """

    kind: str
    location: str
    name: str
    jobs: tuple[str, ...] = ()


def is_metrics_url(text: str) -> bool:
    """Whether ``text`` names a ``/metrics`` page (``http(s)://``), whatever else it holds."""
    return text.lower().startswith(("http://", "https://"))


def metrics_url(text: str) -> MetricsUrl:
    """``text`` as a :class:`MetricsUrl`; ``ValueError`` when it is no http(s) URL with a host."""
    parts = urllib.parse.urlsplit(text.rstrip("/"))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {text!r}")
    return MetricsUrl(text)


def plugin_records(text: str, ranks: tuple[int, ...] = (0,)) -> PluginRecords:
    """``text`` as the records of ``ranks``; ``ValueError`` when one cannot be subscribed to."""
    records = PluginRecords(zmq_endpoint(text), ranks)
    records.endpoints()  # a rank past the last port is refused now, not when watched
    return records


def watch_address(text: str, ranks: tuple[int, ...] = (0,)) -> WatchAddress:
    """One ``--attach`` server: a ``/metrics`` page for ``http(s)://``, else the plug-in's
    records (``ranks`` apply to those)."""
    return metrics_url(text) if is_metrics_url(text) else plugin_records(text, ranks)


def is_prometheus(text: str) -> bool:
    """An ``--attach`` that asks a Prometheus server for the fleet (``prometheus://``)."""
    return text.lower().startswith(PROMETHEUS_SCHEME)


def prometheus_discovery(text: str) -> Discovery:
    """``prometheus://HOST[:PORT][/PREFIX][?job=NAME...]`` as the Prometheus server's base URL
    (plain HTTP; PORT 9090 when not given, as Prometheus listens) and the jobs to take;
    ``ValueError`` with what to write instead."""
    parts = urllib.parse.urlsplit(text)
    try:
        port = parts.port or PROMETHEUS_PORT
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise ValueError(f"{text!r} is not a prometheus://HOST:PORT[?job=NAME]")
    query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"job"})
    if unknown or parts.fragment:
        raise ValueError(
            f"{text}: unknown {', '.join(map(repr, unknown or [parts.fragment]))} "
            "(prometheus://HOST:PORT takes ?job=NAME only)"
        )
    jobs = tuple(dict.fromkeys(query.get("job", [])))
    if any(not job for job in jobs):
        raise ValueError(f"{text}: ?job= names no job")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    location = f"http://{host}:{port}{parts.path.rstrip('/')}"
    return Discovery(PROMETHEUS, location, text, jobs)


def listed_address(text: str, ranks: tuple[int, ...] = (0,)) -> WatchAddress | Discovery:
    """Anything ``--attach`` takes: one server, or a Prometheus server's listing of them."""
    return prometheus_discovery(text) if is_prometheus(text) else watch_address(text, ranks)
