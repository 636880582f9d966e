"""The TUI's side of ``--flight-recorder``: the F key asks for a recording, and the app tells
the user where each recording went (a toast, and the status bar while it is being written).

The recorder lives in the trace package and runs on the driver thread; the app holds it only
as a :class:`~stepview.model.flight.FlightControl`. Writing a full ring can take a moment, so
the key asks from a worker thread; the app's timer then sees :attr:`FlightControl.last`
change (:meth:`FlightKey.tell`), whichever thread or trigger wrote it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from stepview.model.flight import ON_KEY, FlightControl, FlightDump
from stepview.ui.main.status_bar import StatusBar

NO_RECORDER = (
    "No flight recorder: start stepview with --flight-recorder 10m to keep the last minutes"
)

NOTHING_YET = "Nothing to record yet: the flight recorder keeps steps from the engine's first on"


class FlightKey:
    """What the app knows of its flight recorder (none: the key says how to get one)."""

    def __init__(self, control: FlightControl | None) -> None:
        self.control = control
        self._seen: FlightDump | None = None

    def ask(self, by: str = ON_KEY) -> str:
        """Ask for a recording (off the UI thread), ``by`` the key or ``SIGUSR1``; what to
        tell the user now."""
        control = self.control
        if control is None:
            return NO_RECORDER
        if not control.has_steps:
            return NOTHING_YET
        why = "asked for with the F key" if by == ON_KEY else "asked for with SIGUSR1"
        threading.Thread(
            target=control.request,
            args=(by, why),
            name="stepview-flight",
            daemon=True,
        ).start()
        return "Writing the flight recording..."

    def tell(self, status: StatusBar, notify: Callable[..., object]) -> None:
        """If the latest recording changed (written, extended or done): name it in the
        status bar while it is being written, and in a toast when it is written or extended."""
        control = self.control
        last = None if control is None else control.last
        if last is self._seen or last is None:
            return
        self._seen = last
        status.show_flight(last)
        if last.open:
            notify(dump_text(last), title="Flight recorder", timeout=10)


def dump_text(dump: FlightDump) -> str:
    """A toast's text for a recording written or extended, or its stacks added."""
    if dump.stacks is not None:
        return f"Flight recording {dump.path}: {dump.stacks}"
    if dump.extended:
        return f"Flight recording goes on ({dump.why}): {dump.path}"
    return f"Flight recording ({dump.why}) in {dump.path}; it goes on for a while"
