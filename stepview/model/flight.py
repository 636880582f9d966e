"""The flight recorder as the UI and the launcher see it: what was written, and how to ask.

The recorder (:mod:`stepview.trace.flight`) is a driver sink; the TUI's key and ``SIGUSR1``
ask it for a recording from other threads, and the status bar names the file it wrote. This
protocol is what they hold, so neither the UI nor the launcher's signal handler needs the
trace package to name it.
"""

from __future__ import annotations

from typing import Final, NamedTuple, Protocol

ON_SIGNAL: Final = "signal"  # FlightDump.kind of a recording asked for with SIGUSR1
ON_KEY: Final = "key"  # ... with the TUI's key


class FlightDump(NamedTuple):
    """One flight recording: its file, why it was written or last extended (an alert's kind
    and text, or ``signal``/``key``), the step it opens at, whether it is still being written
    (it goes on while alerts keep coming), whether ``why`` extended it, and, once the engine
    cores' stacks were added to it, what they say in a line (``stacks``)."""

    path: str
    kind: str
    why: str
    step: int
    open: bool = True
    extended: bool = False
    stacks: str | None = None


class FlightControl(Protocol):
    """A flight recorder: asked for a recording from any thread; what it wrote last."""

    def request(self, kind: str, why: str) -> None:
        """Write what the ring holds now (or extend the recording being written)."""

    @property
    def last(self) -> FlightDump | None:
        """The latest recording, None before the first."""

    @property
    def has_steps(self) -> bool:
        """Whether a step has been kept yet (before the engine's first, a recording would be
        empty: a request then is answered with why, not with an empty file)."""
