"""Snapshot sources that stand still: the app drawn from fixed snapshots, no thread, no clock.

They implement :class:`~stepview.model.source.SnapshotSource` and record the commands the app
sends, so a test can check what a key asked for without an engine.
"""

from __future__ import annotations

from collections.abc import Sequence

from stepview.model.commands import Command
from stepview.model.snapshot import StepSnapshot


class StaticSource:
    """A :class:`SnapshotSource` whose ``latest()`` is whatever the test set; records commands."""

    def __init__(self, snapshot: StepSnapshot, *, accepts_requests: bool = True) -> None:
        self.snapshot = snapshot
        self.accepts_requests = accepts_requests
        self.sent: list[Command] = []
        self.started = False
        self.stopped = False

    def start(self) -> None:
        self.started = True

    def latest(self) -> StepSnapshot:
        return self.snapshot

    def history(self) -> Sequence[StepSnapshot]:
        return (self.snapshot,)

    def send(self, command: Command) -> None:
        self.sent.append(command)

    def stop(self, timeout: float = 5.0) -> None:
        self.stopped = True

    @property
    def alive(self) -> bool:
        return self.started and not self.stopped


class HistorySource(StaticSource):
    """A live source that has published ``snapshots``: the last is ``latest()``, all are kept."""

    def __init__(self, snapshots: Sequence[StepSnapshot]) -> None:
        super().__init__(snapshots[-1])
        self.snapshots = list(snapshots)

    def publish(self, snapshot: StepSnapshot) -> None:
        self.snapshots.append(snapshot)
        self.snapshot = snapshot

    def history(self) -> Sequence[StepSnapshot]:
        return tuple(self.snapshots)
