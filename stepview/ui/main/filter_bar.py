"""The one-line filter input that ``/`` opens above the footer: the request panes', the fleet's."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input

REQUESTS_PLACEHOLDER = "text or is:STATE (is:aborted, is:length...); enter keeps, esc clears"
"""What the request panes' filter takes; the fleet screen's says its own."""


class FilterBar(Input):
    """A compact input; enter keeps the filter, escape clears it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear_filter", "Clear filter"),
    ]

    class Cleared(Message):
        """The user dropped the filter (escape)."""

    def __init__(self, *, id: str | None = None, placeholder: str = REQUESTS_PLACEHOLDER) -> None:
        super().__init__(placeholder=placeholder, id=id, compact=True)

    def action_clear_filter(self) -> None:
        self.value = ""
        self.post_message(self.Cleared())
