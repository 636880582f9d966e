"""The HTTP endpoint Prometheus scrapes: ``prometheus_client``'s own server, on a daemon thread.

``start_http_server`` binds the port at once, in the calling thread, so a port already in use
is known before the engine starts and is said in one line (:class:`MetricsUnavailable`); then
the server answers on a thread of its own (one more per scrape, as short as the scrape). It
holds the GIL only to render a scrape: a few dozen series, well under a millisecond, and a
wake-up every half second otherwise. It listens on the loopback address unless told
otherwise: the figures are about someone's server and have no authentication.

Stopping it (:meth:`MetricsServer.stop`) does not wait: ``shutdown()`` waits for the serving
loop's next wake-up (up to half a second), and the way out of a run has a deadline of its
own, so the server is shut down on a thread of its own while the run ends.
"""

from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from stepview.model.endpoint import bind_problem, netloc

DEFAULT_HOST = "127.0.0.1"


class MetricsUnavailable(Exception):
    """The endpoint cannot be served; the message is the one line to tell the user."""


class MetricsServer:
    """``registry`` served at ``http://host:port/metrics`` until :meth:`stop`."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        """Bind and start serving; raises :class:`MetricsUnavailable` when it cannot."""
        try:
            server, thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:  # socket.gaierror too: a host name that does not resolve
            raise MetricsUnavailable(bind_problem("metrics", host, port, exc)) from None
        thread.name = "stepview-metrics"
        self._server: WSGIServer = server
        self._thread = thread
        self._stopped: threading.Thread | None = None
        self.host = host
        self.port: int = server.server_address[1]
        """The port it listens on (the one the system chose, for ``--metrics-port 0``)."""

    @property
    def url(self) -> str:
        return f"http://{netloc(self.host, self.port)}/metrics"

    def stop(self) -> None:
        """Stop serving and release the port, on a thread of its own (see the module
        docstring); calling it again does nothing."""
        if self._stopped is None:
            self._stopped = threading.Thread(
                target=self._shut, name="stepview-metrics-stop", daemon=True
            )
            self._stopped.start()

    def join(self, timeout: float | None = None) -> None:
        """Wait until the port is released (after :meth:`stop`)."""
        if self._stopped is not None:
            self._stopped.join(timeout)

    def _shut(self) -> None:
        self._server.shutdown()
        self._server.server_close()
