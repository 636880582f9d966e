"""The load dialog (``w``): the ``--load`` flags as a form, to ask "what at twice the rate?".

Its fields are the command line's (how many, rate, input and output lengths, seed, mix), read
by the same parsers (:func:`stepview.model.load.parse_load_fields`), so the dialog and the
flags refuse the same input with the same words. Like the add-prompt form it re-checks on
every edit and shows each message beside its field; submitting returns a
:class:`~stepview.model.load.LoadSpec` and the app schedules its requests.

The fields start at :class:`~stepview.model.load.LoadSpec`'s defaults, which queue requests
on the demo model at once; the last load submitted is offered again, so "same again at twice
the rate" is one edit.
"""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from stepview.model.load import LOAD_FIELDS, MIX_HELP, LoadSpec, parse_load_fields
from stepview.ui.dialogs.add_form import show_field_errors
from stepview.ui.footer import FittingFooter

# Each field's label and what it takes (shown as the placeholder of an empty field).
_LABELS = {
    "count": ("requests", "1 or more"),
    "rate": ("rate (per s)", "inf = all at once"),
    "input_len": ("input tokens", "MIN:MAX"),
    "output_len": ("output tokens", "MIN:MAX"),
    "seed": ("seed", "whole number"),
    "mix": ("sampling mix", "greedy:1,sampled:1"),
}


class LoadForm(ModalScreen[LoadSpec | None]):
    """Modal form; dismisses with a :class:`LoadSpec`, or ``None`` if cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "submit", "Start", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, spec: LoadSpec | None = None, *, max_model_len: int = 0) -> None:
        """``max_model_len`` (0: unknown) lets the form refuse lengths the engine cannot run."""
        super().__init__()
        self.max_model_len = max_model_len
        self._initial = (spec or LoadSpec()).field_text()
        self.errors: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        with Vertical(id="form"):
            with VerticalScroll(id="form-scroll"):
                for name in LOAD_FIELDS:
                    label, placeholder = _LABELS[name]
                    with Horizontal(classes="field"):
                        yield Label(label, classes="field-label")
                        yield Input(
                            self._initial[name],
                            id=f"field-{name}",
                            compact=True,
                            placeholder=placeholder,
                        )
                        yield Static(id=f"error-{name}", classes="field-error")
                yield Static(f"Mix: {MIX_HELP}.", id="load-note")
            with Horizontal(id="form-buttons"):
                yield Button("Start", id="submit", variant="primary", compact=True)
                yield Button("Cancel", id="cancel", compact=True)
                yield Static(id="form-status")
        yield FittingFooter()

    def on_mount(self) -> None:
        form = self.query_one("#form")
        form.border_title = "Synthetic load"
        form.border_subtitle = "ctrl+s start · esc cancel"
        self.query_one("#field-count", Input).focus()

    def values(self) -> dict[str, str]:
        """The text of every field, as :func:`parse_load_fields` takes it."""
        return {name: self.query_one(f"#field-{name}", Input).value for name in LOAD_FIELDS}

    def set_values(self, values: dict[str, str]) -> None:
        for name, value in values.items():
            self.query_one(f"#field-{name}", Input).value = value

    def validate(self) -> LoadSpec | None:
        """Check every field, show each message beside it; the load if all are valid."""
        spec, errors = parse_load_fields(self.values(), self.max_model_len or None)
        self.errors = errors
        show_field_errors(self, LOAD_FIELDS, errors)
        return spec

    @on(Input.Changed)
    def _changed(self) -> None:
        self.validate()

    @on(Input.Submitted)
    def action_submit(self) -> None:
        spec = self.validate()
        if spec is None:
            first = next(iter(self.errors), None)
            if first is not None:
                self.query_one(f"#field-{first}").focus()
            return
        self.dismiss(spec)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#submit")
    def _start(self) -> None:
        self.action_submit()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.action_cancel()
