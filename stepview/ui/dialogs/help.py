"""The ``?`` screen: every key, built from the bindings themselves.

The rows come from the ``BINDINGS`` lists of the app, the panes and the form (with each
binding's ``tooltip`` as the longer explanation), so the help cannot drift from what the
keys actually do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from stepview.ui.footer import FittingFooter

HelpSection = tuple[str, Iterable[BindingType]]


class HelpScreen(ModalScreen[None]):
    """A modal list of keys by section; any of escape, ``?`` or ``q`` closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close", key_display="esc"),
    ]

    def __init__(self, sections: Iterable[HelpSection], notes: Iterable[str] = ()) -> None:
        super().__init__()
        self.sections = list(sections)
        self.notes = list(notes)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(self._text())
        yield FittingFooter()

    def on_mount(self) -> None:
        box = self.query_one("#help")
        box.border_title = "Keys"
        box.border_subtitle = "esc close"

    def _text(self) -> Content:
        parts: list[str | tuple[str, str]] = []
        for title, bindings in self.sections:
            parts += [(title, "bold $primary"), "\n"]
            for keys, text in self._rows(bindings):
                parts += [(f"  {keys:<11}", "bold $secondary"), text, "\n"]
            parts.append("\n")
        for note in self.notes:
            parts += [(note, "$text-muted"), "\n"]
        return Content.assemble(*parts)

    def _rows(self, bindings: Iterable[BindingType]) -> list[tuple[str, str]]:
        """(keys, explanation) per action, keys of one action joined (``↑ k``)."""
        rows: dict[str, tuple[list[str], str]] = {}
        for binding in Binding.make_bindings(bindings):
            if binding.system:
                continue
            keys, _ = rows.setdefault(binding.action, ([], binding.tooltip or binding.description))
            shown = self.app.get_key_display(binding)
            if shown not in keys:
                keys.append(shown)
        return [(" ".join(keys), text) for keys, text in rows.values()]


def app_help(app_bindings: Iterable[BindingType]) -> HelpScreen:
    """The app's ``?`` screen: its own keys (``app_bindings``), then those of each view."""
    from stepview.ui.bindings import TIME_BINDINGS, VIEW_BINDINGS
    from stepview.ui.detail.screen import DetailScreen
    from stepview.ui.dialogs.add_form import PromptForm
    from stepview.ui.dialogs.load_form import LoadForm
    from stepview.ui.main.request_table import RequestTable
    from stepview.ui.views.latency_view import LatencyScreen

    return HelpScreen(
        [
            (
                "Engine and requests",
                [b for b in app_bindings if b not in TIME_BINDINGS and b not in VIEW_BINDINGS],
            ),
            ("History and replay", TIME_BINDINGS),
            ("Views of the step on screen (live, history, replay)", VIEW_BINDINGS),
            ("In a pane", RequestTable.BINDINGS),
            ("In the detail view", DetailScreen.BINDINGS),
            ("In the latency panel", LatencyScreen.BINDINGS),
            ("In the add-prompt form", PromptForm.BINDINGS),
            ("In the load dialog", LoadForm.BINDINGS),
        ],
        notes=[
            "Pending: waiting for the engine, or preempted (KV cache freed).",
            "Running: prefill x/y tokens computed, then decoding.",
            "Latency: queued = arrival to scheduled, ttft = arrival to first token.",
            "Header: hit = prefix-cache hit rate of the run, pre = preemptions in this step.",
            "Looking back does not pause the engine (p does); L returns to live.",
        ],
    )
