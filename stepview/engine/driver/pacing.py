"""Pause, resume and single step: when the driver may call ``step()``.

With the engine core in the driver's process, not calling ``step()`` is a pause, and one call
is one step. A core in its own process steps by itself while it has requests, so pausing the
driver alone would only freeze the view while the engine ran on: such a core is held with
vLLM's own pause (:class:`~stepview.model.engine_api.CoreHold`), and the steps it made before
it stopped, or during a single step, are still read, one ``step()`` each (``behind``), so the
view shows exactly what the engine did. A watched server (``--attach``) is not ours to hold:
there pausing only holds the view.
"""

from __future__ import annotations

from stepview.model.engine_api import CoreHold
from stepview.model.snapshot import StepSnapshot

# A watched server that sends nothing while it holds requests still gets a snapshot this often:
# the clock goes on for the watchdogs (``--stuck-after``), as a hung server sends no record.
QUIET_SNAPSHOT_S = 1.0


def quiet_too_long(watched: bool, latest: StepSnapshot, now: float) -> bool:
    """Whether the driver should publish a snapshot without a step (see QUIET_SNAPSHOT_S)."""
    return watched and bool(latest.active) and now - latest.clock >= QUIET_SNAPSHOT_S


class Pacing:
    """The driver's pause state; every method is called from the driver thread."""

    def __init__(self, paused: bool) -> None:
        self.paused = paused
        self._single_steps = 0  # asked for while paused, not made yet
        self._behind = 0  # steps a held core made that are not read yet
        self._hold: CoreHold | None = None

    def engine_started(self, hold: CoreHold | None) -> None:
        """The engine is up; ``hold`` pauses its core if it runs in its own process."""
        self._hold = hold
        if self.paused and hold is not None:
            self._behind = hold.hold()

    @property
    def owed(self) -> bool:
        """Whether a step should run even though paused (a single step, or one to read)."""
        return self._single_steps > 0 or self._behind > 0

    def pause(self) -> None:
        if not self.paused and self._hold is not None:
            self._behind = self._hold.hold()
        self.paused = True

    def resume(self) -> None:
        if self.paused and self._hold is not None:
            self._hold.release()
        self.paused = False
        self._single_steps = self._behind = 0

    def single_step(self) -> None:
        if self.paused:
            self._single_steps += 1

    def nothing_to_step(self) -> None:
        """The engine is empty: a single step asked for now has nothing to do."""
        self._single_steps = 0

    def take_step(self) -> bool:
        """Whether the next ``step()`` may run now, counting it against a pause.

        Running, always. Paused, a single step is owed: in-process it is this ``step()``; a
        held core makes it on its own (``step_once``), and the steps it made, like those made
        before it was held, are read one ``step()`` each.
        """
        if not self.paused:
            return True
        if self._behind == 0 and self._single_steps:
            self._single_steps -= 1
            if self._hold is None:
                return True
            self._behind = self._hold.step_once()
        if self._behind == 0:
            return False
        self._behind -= 1
        return True
