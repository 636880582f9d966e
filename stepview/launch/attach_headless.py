"""``stepview --attach ADDRESS --headless``: watch a server without a TUI, for scripts and logs.

On a GPU box people leave a server running for hours; this records what it did without a
terminal to draw on (``nohup``, a systemd unit, a CI job): every request the server finishes
is printed as ``--headless`` prints its own (vLLM's ``RequestOutput`` form, or one JSON object
per line with ``--json``, timeline included), ``--results`` and ``--record`` write the same
files as an attached TUI, and stderr says when the link to the server is lost and back.

Watching has no end of its own: it runs until Ctrl+C, SIGTERM or SIGHUP, which end it
normally (exit 0, the latency table on stderr, requests still in flight recorded as
``unfinished``). With ``--prompts`` (and ``--api``) it sends them through the server's API
and ends when they have finished. A reader of stdout that goes away ends it quietly (141),
as for any Unix filter.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from stepview.engine.driver.loop import EngineFactory
from stepview.insight.run import RunInsight
from stepview.launch.compose import run_driver
from stepview.launch.exits import notice
from stepview.launch.headless import HeadlessPrinter, drive, finish_run
from stepview.launch.outputs import RunOutputs
from stepview.model.commands import AddRequest
from stepview.model.engine_api import LinkState
from stepview.model.sink import SnapshotSink
from stepview.model.snapshot import EngineState, RequestView, StepSnapshot
from stepview.run.spec import RunSpec

# A view that falls behind again soon after says so at most this often.
BEHIND_NOTICE_EVERY_S = 60.0


class LinkNotices:
    """A sink that says on stderr, once each time, where the link to the server stands:
    connecting, watching, lost, back, fallen behind, requests lost unseen (at most once a
    minute, and a last count on close). (stdout is the results' alone.)"""

    error: str | None = None

    def __init__(self, address: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.address = address
        self._clock = clock
        self._state: EngineState | None = None
        self._phase = ""
        self._behind = ""  # the view's lag, as the link last told it ("" when none)
        self._quiet_until = 0.0
        self._unseen = 0  # requests lost unseen, as last told
        self._unseen_quiet_until = 0.0
        self.link_state: Callable[[], LinkState | None] = lambda: None
        """The driver's link state (``Driver.link``), once there is a driver."""
        self.reached = False
        """The link to the server was made, at least once (a zmq handshake with its
        publisher: an idle server sends no record until it has work)."""

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        self._tell_unseen()
        state, before = snapshot.engine_state, self._state
        if state is EngineState.STARTING:
            # "connecting to ADDRESS", then what it waits for and what to check: each once.
            phase = snapshot.phase
            if phase != self._phase and self.address in phase:
                self._phase = phase
                notice(phase)
        elif state is EngineState.RUNNING and snapshot.phase != self._behind:
            # "view N s behind the server, catching up": when it starts, not every second.
            now = self._clock()
            if snapshot.phase and not self._behind and now >= self._quiet_until:
                notice(snapshot.phase)
                self._quiet_until = now + BEHIND_NOTICE_EVERY_S
            self._behind = snapshot.phase
        elif state is not EngineState.RUNNING:
            self._behind = ""
        if state is before or state is EngineState.PAUSED:
            return
        self._state = state
        reached = state in (EngineState.RUNNING, EngineState.IDLE)
        self.reached = self.reached or reached
        if state is EngineState.DISCONNECTED:
            notice(snapshot.phase or f"DISCONNECTED from {self.address}")
        elif reached and before is EngineState.DISCONNECTED:
            notice(f"back in touch with {self.address}")
        elif reached and before in (None, EngineState.STARTING):
            notice(f"watching {snapshot.info.label or self.address} (Ctrl+C to stop)")

    def _tell_unseen(self, last: bool = False) -> None:
        """Requests that came and went in records the view lost: a user watching for weeks
        must know the results file misses them (the log has each batch)."""
        link = self.link_state()
        if link is None or link.unseen <= self._unseen:
            return
        now = self._clock()
        if not last and now < self._unseen_quiet_until:
            return
        self._unseen_quiet_until = now + BEHIND_NOTICE_EVERY_S
        more = " more" if self._unseen else ""
        new, self._unseen = link.unseen - self._unseen, link.unseen
        notice(
            f"{new}{more} requests at {self.address} arrived and ended while their records "
            f"were lost (view behind, or link down) and past the server's log of ends: not in "
            f"the results file "
            f"({link.unseen} so far; stepview_requests_unseen_total counts them)"
        )

    def close(self) -> None:
        self._tell_unseen(last=True)


def watch_headless(
    spec: RunSpec,
    factory: EngineFactory,
    outputs: RunOutputs,
    requests: Sequence[AddRequest],
    *,
    read_only: str | None,
    insight: RunInsight,
) -> int:
    """Watch until stopped (see the module docstring); the exit code.

    ``outputs`` are the results file and trace, already open, annotated by ``insight``;
    ``requests`` the prompts to send through the server's API (with no ``--api``,
    ``read_only`` says why there are none).
    """
    address = spec.watch.name
    assert address is not None
    printer = HeadlessPrinter(
        len(requests) if requests else None,
        json_lines=spec.front.json,
        out=outputs.printing_to(),
        err=sys.stderr,
        annotate=insight.request_fields,
        awaited=[request.request_id for request in requests],
    )
    link = LinkNotices(address)
    sinks: list[SnapshotSink] = [printer, link]
    driver = run_driver(
        factory,
        spec,
        outputs=outputs,
        sinks=sinks,
        history=1,
        read_only=read_only,
        insight=insight,
    )
    link.link_state = lambda: driver.link
    code, completed = drive(
        driver,
        requests,
        printer,
        outputs.results,
        watching=True,
        reached=lambda: link.reached,
        flight=outputs.flight,
    )
    return finish_run(driver, outputs, code, completed)
