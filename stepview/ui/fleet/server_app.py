"""One server of a fleet in the full single-server view, and Esc back to the fleet.

The view is the very :class:`~stepview.ui.app.StepviewApp` a single ``--attach`` shows (the
request panes, detail, step and latency views where the plug-in publishes; the ``/metrics``
panel where it does not), run on the server's own source. Two things differ, both because the
source belongs to the fleet, not to this view: it is :class:`Borrowed` (the app's start and
stop do nothing to it: the fleet started it and keeps it running, so its window stays whole
while the user looks elsewhere), and Esc on the main screen ends the app with :data:`BACK`,
after which the launcher shows the fleet again. ``q`` ends with :data:`QUIT`: the launcher
stops every source.

Why an app per screen rather than pushing a screen: the single-server view is a whole app
(its timer, keys, history timeline and dialogs hang off the app), and one source per app is
what it is built on. Running it as it is keeps one definition of that view.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from textual.binding import Binding, BindingType

from stepview.model.commands import Command
from stepview.model.snapshot import StepSnapshot
from stepview.model.source import SnapshotSource
from stepview.ui.app import StepviewApp
from stepview.ui.bindings import APP_BINDINGS

BACK, QUIT = "back", "quit"


class Borrowed:
    """A running source lent to one view: everything but start and stop goes through."""

    def __init__(self, source: SnapshotSource) -> None:
        self.source = source

    @property
    def accepts_requests(self) -> bool:
        return self.source.accepts_requests

    @property
    def read_only(self) -> str | None:
        return getattr(self.source, "read_only", None)

    def start(self) -> None:
        """Already running: the fleet started it."""

    def stop(self, timeout: float = 5.0) -> None:
        """The fleet's to stop, when the user quits the fleet."""

    def latest(self) -> StepSnapshot:
        return self.source.latest()

    def history(self) -> Sequence[StepSnapshot]:
        return self.source.history()

    def send(self, command: Command) -> None:
        self.source.send(command)

    @property
    def alive(self) -> bool:
        return self.source.alive


class FleetServerApp(StepviewApp):
    """:class:`StepviewApp` on one fleet server's borrowed source; Esc returns to the fleet."""

    CSS_PATH = str(Path(__file__).parent.parent / StepviewApp.CSS_PATH)  # relative to ui/, not here
    BINDINGS: ClassVar[list[BindingType]] = [
        *APP_BINDINGS,
        Binding("escape", "to_fleet", "Fleet", tooltip="Back to the fleet"),
    ]

    def __init__(self, source: SnapshotSource, *, cpu_budget: float | None = None) -> None:
        super().__init__(Borrowed(source), cpu_budget=cpu_budget)
        self.leaving = QUIT
        """How the user left: :data:`BACK` (Esc) to the fleet, or :data:`QUIT`."""

    def action_to_fleet(self) -> None:
        self.leaving = BACK
        self.exit()

    async def action_quit(self) -> None:
        self.leaving = QUIT
        self.exit()
