"""What the UI reads from: the live driver, a replayed trace, or a scripted fake.

The app is built from a :class:`SnapshotSource` (as Harlequin builds its app from an adapter),
so the same panes show a live vLLM engine, a trace recorded on a GPU box, or a deterministic
scenario in tests. The UI pulls :meth:`SnapshotSource.latest` on a timer; it never waits on
the source and never receives a live engine object.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from stepview.model.commands import Command
from stepview.model.snapshot import StepSnapshot

# How long quitting waits for a source to stop (the engine between two steps, files flushed)
# before leaving it behind: one deadline for the app's quit and the launcher's clean-up.
STOP_TIMEOUT_S = 4.0


class SnapshotSource(Protocol):
    """A producer of :class:`StepSnapshot` values running on its own thread."""

    @property
    def accepts_requests(self) -> bool:
        """False for a replay: the add-prompt form and abort are disabled."""

    def start(self) -> None:
        """Begin producing (returns at once; start-up progress shows in ``latest()``)."""

    def latest(self) -> StepSnapshot:
        """The newest snapshot; a ``STARTING`` one before the engine is up."""

    def history(self) -> Sequence[StepSnapshot]:
        """Past snapshots still kept (bounded), oldest first; for scrubbing back."""

    def send(self, command: Command) -> None:
        """Queue a command; never blocks, never raises for a bad request (it is rejected)."""

    def stop(self, timeout: float = 5.0) -> None:
        """Shut down and wait (at most ``timeout`` seconds) for the producer thread to end."""

    @property
    def alive(self) -> bool:
        """True while the producer thread runs."""
