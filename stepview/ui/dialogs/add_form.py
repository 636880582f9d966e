"""The add-prompt form: a prompt, every sampling field, presets, and vLLM's rules inline.

Validation is :func:`stepview.model.sampling.parse_form`, the same rules vLLM applies,
restated without importing vLLM. The form re-checks on every edit and shows each message
beside its field, so "top_p must be in (0, 1]" appears before anything is sent; submitting
returns a plain :class:`NewPrompt` (like Posting's ``to_model()``) and the app turns it
into an ``AddRequest``. Limits that only the engine knows (a prompt longer than
``max_model_len``) are left to the engine, which rejects the request visibly.

The *chat* switch beside the prompt sends the text as a user message (after the earlier
messages of a cloned chat request): the engine applies the model's chat template, and the
request's prompt is the templated text. A model without a template (or an attached server)
gets the switch disabled, with the reason beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Static, Switch, TextArea

from stepview.model.chat import Chat, user_turn
from stepview.model.sampling import (
    DEFAULT_MAX_LOGPROBS,
    FORM_FIELDS,
    SamplingSpec,
    form_values,
    parse_form,
)
from stepview.ui.dialogs.presets import PRESETS
from stepview.ui.footer import FittingFooter
from stepview.ui.plain import literal

EMPTY_PROMPT = "The prompt is empty: type the text the model should continue."

# What an empty optional field means, shown as its placeholder.
_PLACEHOLDERS = {
    "seed": "random",
    "logprobs": "off",
    "prompt_logprobs": "off",
    "stop": "one per line",
}


@dataclass(frozen=True, slots=True)
class NewPrompt:
    """What a valid form holds: the prompt and its parameters (the app adds the id).

    ``messages``, for a chat: the conversation to template (``prompt`` is then its last
    user message's text, as typed)."""

    prompt: str
    spec: SamplingSpec
    messages: Chat = ()


def show_field_errors(
    screen: ModalScreen[Any], names: Iterable[str], errors: Mapping[str, str]
) -> None:
    """Show each field's message beside it (``#error-NAME``), mark the field (``#field-NAME``)
    and count what is left to fix in ``#form-status``: the forms' one way of saying what is
    wrong, while typing."""
    for name in names:
        message = errors.get(name, "")
        show_text(screen.query_one(f"#error-{name}", Static), message)
        screen.query_one(f"#field-{name}").set_class(bool(message), "-error")
    status = screen.query_one("#form-status", Static)
    show_text(status, f"{len(errors)} field(s) to fix" if errors else "")


def show_text(static: Static, text: str) -> None:
    """Put ``text`` in ``static`` unless it shows it already: ``Static.update`` lays the whole
    screen out again even for the same text, and a form re-validates every field on each key
    (one changed message, a dozen unchanged ones). A message may quote what the user typed:
    it is shown as written (:mod:`stepview.ui.plain`)."""
    if str(static.content) != text:
        static.update(literal(text))


class PromptForm(ModalScreen[NewPrompt | None]):
    """Modal form; dismisses with a :class:`NewPrompt`, or ``None`` if cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "submit", "Submit", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(
        self,
        *,
        max_logprobs: int = DEFAULT_MAX_LOGPROBS,
        spec: SamplingSpec | None = None,
        prompt: str = "",
        title: str = "Add a prompt",
        chat: bool = False,
        history: Chat = (),
        no_chat: str = "",
    ) -> None:
        """``prompt``, ``spec`` and ``title`` prefill the form (a clone or fork: "Clone r3");
        ``chat`` turns the switch on, ``history`` is the messages before the prompt's (a
        cloned chat's); ``no_chat`` says why chat is unavailable (the switch is disabled)."""
        super().__init__()
        self._chat = chat and not no_chat
        self._history = history
        self._no_chat = no_chat
        self.max_logprobs = max_logprobs
        self._initial = form_values(spec or SamplingSpec())
        self._initial_prompt = prompt
        self._title = title
        self.errors: dict[str, str] = {}
        self._prompt_checked = False  # say "empty" only once the user tried to submit

    def compose(self) -> ComposeResult:
        with Vertical(id="form"):
            with VerticalScroll(id="form-scroll"):
                yield TextArea(self._initial_prompt, id="prompt", compact=True, soft_wrap=True)
                yield Static(id="error-prompt", classes="field-error")
                with Horizontal(id="chat-row"):
                    yield Label("chat", classes="field-label")
                    yield Switch(self._chat, id="chat", disabled=bool(self._no_chat))
                    yield Static(self._chat_note(self._chat), id="chat-note")
                with Horizontal(id="presets"):
                    yield Label("Presets", classes="field-label")
                    for preset in PRESETS:
                        yield Button(preset.label, id=f"preset-{preset.key}", compact=True)
                for name in FORM_FIELDS:
                    with Horizontal(classes="field"):
                        yield Label(name, classes="field-label")
                        yield self._field(name)
                        yield Static(id=f"error-{name}", classes="field-error")
            with Horizontal(id="form-buttons"):
                yield Button("Submit", id="submit", variant="primary", compact=True)
                yield Button("Cancel", id="cancel", compact=True)
                yield Static(id="form-status")
        yield FittingFooter()

    def _field(self, name: str) -> Widget:
        value = self._initial[name]
        placeholder = _PLACEHOLDERS.get(name, "")
        if name == "stop":
            return TextArea(value, id=f"field-{name}", compact=True, placeholder=placeholder)
        return Input(value, id=f"field-{name}", compact=True, placeholder=placeholder)

    def on_mount(self) -> None:
        form = self.query_one("#form")
        form.border_title = literal(self._title)  # a clone's names its parent's id
        form.border_subtitle = "ctrl+s submit · esc cancel"
        self.query_one("#prompt").border_title = "Prompt"
        prompt = self.query_one("#prompt", TextArea)
        prompt.move_cursor(prompt.document.end)  # a fork's prompt is continued at its end
        prompt.focus()

    # -- values ----------------------------------------------------------------------------

    @property
    def prompt(self) -> str:
        return self.query_one("#prompt", TextArea).text

    @property
    def chat(self) -> bool:
        """The prompt goes as a chat's user message (the switch is on)."""
        return self.query_one("#chat", Switch).value

    def _chat_note(self, chat: bool) -> str:
        if self._no_chat:
            return self._no_chat
        if not chat:
            return "off: the prompt is sent as it is"
        earlier = f", after {len(self._history)} earlier message(s)" if self._history else ""
        return f"the prompt is a user message{earlier}; the model's chat template is applied"

    @on(Switch.Changed, "#chat")
    def _chat_switched(self, event: Switch.Changed) -> None:
        self.query_one("#chat-note", Static).update(self._chat_note(event.value))

    def values(self) -> dict[str, str]:
        """The text of every sampling field, as :func:`parse_form` takes it."""
        out: dict[str, str] = {}
        for name in FORM_FIELDS:
            widget = self.query_one(f"#field-{name}")
            if isinstance(widget, TextArea):
                out[name] = widget.text
            else:
                out[name] = self.query_one(f"#field-{name}", Input).value
        return out

    def set_values(self, values: dict[str, str]) -> None:
        for name, value in values.items():
            widget = self.query_one(f"#field-{name}")
            if isinstance(widget, TextArea):
                widget.load_text(value)
            elif isinstance(widget, Input):
                widget.value = value

    # -- validation ------------------------------------------------------------------------

    def validate(self) -> NewPrompt | None:
        """Check everything, show each message beside its field; the result if valid."""
        spec, errors = parse_form(self.values(), max_logprobs=self.max_logprobs)
        prompt = self.prompt
        if self._prompt_checked and not prompt.strip():
            errors = {"prompt": EMPTY_PROMPT, **errors}
        self.errors = errors
        show_text(self.query_one("#error-prompt", Static), errors.get("prompt", ""))
        show_field_errors(self, FORM_FIELDS, errors)
        if spec is None or "prompt" in errors:
            return None
        return NewPrompt(prompt, spec, user_turn(prompt, self._history) if self.chat else ())

    @on(Input.Changed)
    @on(TextArea.Changed)
    def _changed(self) -> None:
        self.validate()

    # -- actions ---------------------------------------------------------------------------

    @on(Input.Submitted)
    def action_submit(self) -> None:
        self._prompt_checked = True
        result = self.validate()
        if result is None:
            first = next(iter(self.errors), None)
            if first is not None:
                self.query_one("#prompt" if first == "prompt" else f"#field-{first}").focus()
            return
        self.dismiss(result)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        button = event.button.id or ""
        if button == "submit":
            self.action_submit()
        elif button == "cancel":
            self.action_cancel()
        elif button.startswith("preset-"):
            self.apply_preset(button.removeprefix("preset-"))

    def apply_preset(self, key: str) -> None:
        """Fill every field from a preset; an empty prompt gets the preset's prompt too."""
        preset = next(p for p in PRESETS if p.key == key)
        self.set_values(form_values(preset.spec))
        prompt = self.query_one("#prompt", TextArea)
        if not prompt.text and preset.prompt:
            prompt.load_text(preset.prompt)
