"""Adding requests from the UI: the add form (blank, or prefilled by a clone or a fork), the
demo prompts, a synthetic load, request ids, and saying why nothing can be added to a replay.

Kept out of ``app.py`` (which holds the layout and the snapshot loop) so that every way of
adding a request goes through one place: the form validates it with vLLM's rules, and
:meth:`Adder.submit` turns the result into one :class:`AddRequest` carrying its parent.
A fork is asked for by the detail view, which posts :class:`AskToAdd`; the app hands the
draft to :meth:`Adder.open_form`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import App

from stepview.model.chat import Chat, chat_unavailable, split_last_user, user_turn
from stepview.model.commands import AddRequest, Schedule
from stepview.model.lineage import Lineage
from stepview.model.load import LoadSpec, plan_load
from stepview.model.prompts import SEED_PROMPTS
from stepview.model.sampling import DEFAULT_MAX_LOGPROBS
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.model.source import SnapshotSource
from stepview.ui.dialogs.add_form import NewPrompt, PromptForm
from stepview.ui.dialogs.load_form import LoadForm
from stepview.ui.drafts import Draft

READ_ONLY = "This is a replay: adding and aborting requests is disabled."
STARTING_NO_CHAT = "chat waits for the engine: its tokenizer says whether there is a template"


def form_title(lineage: Lineage | None) -> str:
    """The form's title: ``Add a prompt``, ``Clone r3``, ``Fork r3 @ token 17``."""
    if lineage is None:
        return "Add a prompt"
    label = lineage.label()
    return label[0].upper() + label[1:].replace(" of ", " ", 1)


class Adder:
    """Sends the app's new requests to ``source``; ``latest`` is the newest snapshot pulled.

    ``latest`` (not the one on screen) decides the free ids and ``max_logprobs``: while the user
    looks back at an old step, the engine has moved on.
    """

    def __init__(
        self,
        app: App[Any],
        source: SnapshotSource,
        latest: Callable[[], StepSnapshot | None],
    ) -> None:
        self._app = app
        self._source = source
        self._latest = latest
        self._next_id = 1
        self._last_load: LoadSpec | None = None  # offered again by the load dialog
        self._loads = 0  # loads started, for their request ids

    def read_only(self) -> bool:
        """True (and say why) when the source takes no requests: a replay, say."""
        if self._source.accepts_requests:
            return False
        reason = getattr(self._source, "read_only", None)  # why (attached without --api, say)
        self._app.notify(reason if isinstance(reason, str) else READ_ONLY, severity="warning")
        return True

    def new_request_id(self) -> str:
        """``u1``, ``u2``, …, skipping any id the newest snapshot already has."""
        while True:
            request_id = f"u{self._next_id}"
            self._next_id += 1
            live = self._latest()
            if live is None or live.find(request_id) is None:
                return request_id

    def no_chat(self) -> str:
        """Why the engine takes no chat requests (``""``: it does)."""
        latest = self._latest()
        if latest is None or latest.engine_state is EngineState.STARTING:
            return STARTING_NO_CHAT
        return chat_unavailable(latest.info.chat_template, latest.info.attached)

    def open_form(self, draft: Draft | None = None) -> None:
        """The add form, blank or prefilled from ``draft``; submitting sends the request.

        A chat draft (a clone) opens with chat on, its last user message in the prompt box
        and the messages before it kept."""
        if self.read_only():
            return
        latest = self._latest()
        max_logprobs = latest.info.max_logprobs if latest else DEFAULT_MAX_LOGPROBS
        lineage = None if draft is None else draft.lineage
        history: Chat = ()
        prompt = "" if draft is None else draft.prompt
        if draft is not None and draft.messages:
            history, prompt = split_last_user(draft.messages)
        form = PromptForm(
            max_logprobs=max_logprobs,
            spec=None if draft is None else draft.spec,
            prompt=prompt,
            title=form_title(lineage),
            chat=draft is not None and bool(draft.messages),
            history=history,
            no_chat=self.no_chat(),
        )

        def submitted(result: NewPrompt | None) -> None:
            if result is not None:
                self.submit(result, lineage)

        self._app.push_screen(form, submitted)

    def submit(self, result: NewPrompt, lineage: Lineage | None = None) -> str:
        """Send the form's request with its parent; its id."""
        request_id = self.new_request_id()
        prompt = "" if result.messages else result.prompt
        self._source.send(
            AddRequest(request_id, prompt, result.spec, lineage=lineage, messages=result.messages)
        )
        what = "" if lineage is None else f" ({lineage.label()})"
        self._app.notify(f"{request_id}{what} queued; it joins at the next step", timeout=2)
        return request_id

    def demo(self, chat: bool = False) -> None:
        """The seed example's prompts, each with its own parameters; with ``chat``, each as a
        user message (an instruct model answers those; plain, it often stops at once)."""
        if self.read_only():
            return
        no_chat = self.no_chat()
        if chat and no_chat:
            self._app.notify(f"D queues the demo prompts as chat: {no_chat}", severity="warning")
            return
        ids = []
        for prompt, spec in SEED_PROMPTS:
            request_id = self.new_request_id()
            ids.append(request_id)
            if chat:
                self._source.send(AddRequest(request_id, "", spec, messages=user_turn(prompt)))
            else:
                self._source.send(AddRequest(request_id, prompt, spec))
        what = "demo chat prompts" if chat else "demo prompts"
        hint = "" if chat or no_chat else " (D: as chat)"
        self._app.notify(f"{what} queued: {', '.join(ids)}{hint}", timeout=2)

    def load(self) -> None:
        """The load dialog, filled with the last load started (or the defaults)."""
        if self.read_only():
            return
        latest = self._latest()
        max_model_len = latest.info.max_model_len if latest else 0
        self._app.push_screen(LoadForm(self._last_load, max_model_len=max_model_len), self._start)

    def _start(self, spec: LoadSpec | None) -> None:
        if spec is not None:
            self._last_load, self._loads = spec, self._loads + 1
            self._source.send(Schedule(plan_load(spec, prefix=f"load{self._loads}-")))
            self._app.notify(f"load {self._loads}: {spec.count} requests, rate {spec.rate:g}/s")
