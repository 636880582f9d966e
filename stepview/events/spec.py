"""What ``--events`` asks for, parsed: where the events go and how the stream behaves.

Plain data, made once from the command line (the registry's entry,
:mod:`stepview.outputs.events`) and read by whoever opens the outputs
(:mod:`stepview.events.output`), so nothing below the command line looks at the flags'
strings again. A destination is ``-`` (standard output), a file, or
``http://HOST:PORT`` (Server-Sent Events at ``/events``; port 0: the system picks one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

from stepview.model.address import TCP, ZmqEndpoint

STDOUT: Final = "stdout"
FILE: Final = "file"
HTTP: Final = "http"

DEFAULT_STEP_RATE: Final = 4.0
"""``step`` events per second at most, unless asked otherwise (``--events-step-rate``)."""
DEFAULT_BUFFER: Final = 65536
"""Events the stream keeps for readers that reconnect (``--events-buffer``)."""
DEFAULT_QUEUE: Final = 8192
"""Events a reader may fall behind before it loses the oldest (``--events-queue``)."""
FILE_ROTATE: Final = 256 * 1024 * 1024
"""An events file goes on in a new part once it holds this much (so it never grows without
bound, as a rotated trace), keeping :data:`FILE_KEEP` parts."""
FILE_KEEP: Final = 4
TOKEN_ENV: Final = "STEPVIEW_EVENTS_TOKEN"
"""The bearer token, when not given with ``--events-token`` (kept off the process list)."""


@dataclass(frozen=True, slots=True)
class Destination:
    """One ``--events`` value: ``kind`` is :data:`STDOUT`, :data:`FILE` or :data:`HTTP`."""

    kind: str
    text: str  # as given
    path: str = ""  # FILE
    host: str = ""  # HTTP
    port: int = 0  # HTTP


def parse_destination(text: str) -> Destination:
    """``text`` as a destination; ``ValueError`` with the one line to say when it is not."""
    if text == "-":
        return Destination(STDOUT, text)
    parts = urlsplit(text)
    if not (parts.scheme and parts.netloc):  # no SCHEME://: a file's path
        return Destination(FILE, text, path=text)
    if parts.scheme.lower() != "http":
        raise ValueError(
            f"{text}: not -, a file or http://HOST:PORT (only http:// is served; "
            "put a TLS proxy in front for https)"
        )
    try:
        port = parts.port
    except ValueError:
        port = None
    host = parts.hostname or ""
    if not host or port is None or parts.path.rstrip("/") not in ("", "/events"):
        raise ValueError(f"{text}: needs http://HOST:PORT (the stream is at /events)")
    return Destination(HTTP, text, host=host, port=port)


def parse_step_rate(text: str) -> float:
    """``--events-step-rate``: ``all`` (every step: 0 s between them) or a number of events
    per second above 0; the seconds between two ``step`` events."""
    if text.strip().lower() == "all":
        return 0.0
    try:
        rate = float(text)
    except ValueError:
        rate = math.nan
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"must be 'all' or a number of step events a second, got {text!r}")
    return 1.0 / rate


@dataclass(frozen=True, slots=True)
class EventsSpec:
    """Everything ``--events`` and its companion flags say."""

    destinations: tuple[Destination, ...]
    step_every: float = 1.0 / DEFAULT_STEP_RATE  # seconds between step events; 0: every step
    buffer: int = DEFAULT_BUFFER
    queue: int = DEFAULT_QUEUE
    token: str | None = field(default=None, repr=False)  # a secret: never shown
    remote: bool = False  # serve on an address other machines can reach
    prompts: bool = False  # the prompt's text in ``arrived``
    served_flags: tuple[str, ...] = ()
    """The flags of an ``http://`` stream alone that were given (refused without one)."""

    @property
    def on_stdout(self) -> bool:
        """The events go to standard output (what else a mode prints there must not)."""
        return any(d.kind == STDOUT for d in self.destinations)

    @property
    def served(self) -> Destination | None:
        """The ``http://`` destination, if any."""
        return next((d for d in self.destinations if d.kind == HTTP), None)


def remote_refusal(destination: Destination, remote: bool) -> str | None:
    """Why the stream will not be served at ``destination`` (``None``: it may be).

    The same rule as the scheduler plug-in's records
    (:attr:`stepview.model.address.ZmqEndpoint.loopback`): only an address this machine alone
    can reach, unless asked. The events carry every request's id, parameters and timings
    (and prompts with ``--events-prompts``).
    """
    if destination.kind != HTTP or remote:
        return None
    if ZmqEndpoint(TCP, destination.host, destination.port).loopback:
        return None
    return (
        f"--events {destination.text}: other machines could read every request's events "
        "there. Serve on http://127.0.0.1:PORT and read it through an ssh tunnel "
        "(ssh -L PORT:127.0.0.1:PORT), or add --events-remote to serve there anyway "
        f"(with --events-token or {TOKEN_ENV})"
    )
