"""What the screen shows before the first step: start-up progress, or why it failed.

Loading a model takes seconds to minutes; a blank terminal for that long looks like a hang.
The driver publishes a ``STARTING`` snapshot when a phase begins (importing vLLM, loading
weights, sizing the KV cache, …) and cannot publish again until the phase ends, so the time
shown is the snapshot's own (clock - phase_since) plus how long the UI has held that
snapshot, measured by the app's clock; with no clock (tests) the text is fixed.
A failure before the first step replaces the whole screen with the message: the user
should never get a traceback over their terminal.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from stepview.model.snapshot import StepSnapshot
from stepview.ui.display import multi_line, one_line
from stepview.ui.footer import FittingFooter


class LoadingView(Widget):
    """Centered start-up progress: model, phase and time spent in it."""

    DEFAULT_CSS = """
    LoadingView {
        width: auto;
        height: auto;
        padding: 1 2;
        border: round $secondary;
        border-title-align: center;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._snapshot: StepSnapshot | None = None
        self._held = 0.0
        self.border_title = "Starting the engine"

    def show(self, snapshot: StepSnapshot, held: float = 0.0) -> None:
        """Show ``snapshot``, which the app has held for ``held`` seconds."""
        if snapshot is self._snapshot and int(held) == int(self._held):
            return
        self._snapshot, self._held = snapshot, held
        # Attached, nothing is started: stepview waits for a server that runs by itself.
        attached = bool(snapshot.info.attached)
        self.border_title = "Reaching the server" if attached else "Starting the engine"
        self.refresh(layout=True)

    def render(self) -> Content:
        snap = self._snapshot
        if snap is None:
            return Content("starting…")
        model = one_line(snap.info.label, 200)
        phase = one_line(snap.phase, 200) or "starting"
        elapsed = max(0.0, snap.clock - snap.phase_since) + self._held
        return Content.assemble(
            (model, "bold"),
            "\n\n" if model else "",
            (phase, "$secondary"),
            "  ",  # a gap of its own between styled runs (see status_bar.py)
            ("for ", "$text-muted"),
            f"{elapsed:.0f}s",
        )


class ErrorScreen(Screen[None]):
    """The engine failed: its message, and the way out.

    Before the first step there is nothing else to look at, so the app's ``q`` is the only
    key. After a failure mid-run, ``escape`` goes back to the last state for a post-mortem.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back to the panes"),
    ]

    def __init__(self, message: str, *, can_go_back: bool) -> None:
        super().__init__()
        self.message = message
        self.can_go_back = can_go_back

    def compose(self) -> ComposeResult:
        with Vertical(id="error-box"):
            yield Static(Content.styled("The engine failed", "bold $error"), id="error-title")
            with VerticalScroll(id="error-message"):
                yield Static(Content(multi_line(self.message or "(no message)")))
            hint = "press q to quit"
            if self.can_go_back:
                hint += ", escape to look at the last state"
            yield Static(Content.styled(hint, "$text-muted"), id="error-hint")
        yield FittingFooter()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return self.can_go_back
        return True

    def action_back(self) -> None:
        self.dismiss()
