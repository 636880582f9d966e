"""``:`` then a number: jump to a step, in a live run's history or in a replay.

A modal with one digits-only field rather than a key per digit, so a step number can be
typed and corrected before anything moves; the app decides what "go to step N" means for
its source (a :class:`~stepview.ui.main.history_cursor.HistoryCursor` jump, or a replay ``Seek``).
"""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input

from stepview.ui.footer import FittingFooter


class GoToStep(ModalScreen[int | None]):
    """Ask for a step number between ``first`` and ``last`` (a hint; the app clamps)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, first: int, last: int) -> None:
        super().__init__()
        self.first = first
        self.last = last

    def compose(self) -> ComposeResult:
        with Vertical(id="goto"):
            yield Input(placeholder=f"{self.first}-{self.last}", restrict=r"[0-9]*", id="goto-step")
        yield FittingFooter()

    def on_mount(self) -> None:
        box = self.query_one("#goto")
        box.border_title = "Go to step"
        box.border_subtitle = "enter go · esc cancel"

    @on(Input.Submitted, "#goto-step")
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(int(event.value) if event.value else None)

    def action_cancel(self) -> None:
        self.dismiss(None)
