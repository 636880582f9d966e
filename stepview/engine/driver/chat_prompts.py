"""A chat request's prompt: the engine's chat template applied, on the driver's thread.

Only the engine holds the tokenizer and its template, and only the driver's thread may call
the engine, so a chat request (``AddRequest.messages``) is templated as the driver accepts
it: from then on its prompt is the templated text and its prompt tokens the exact ids the
engine will run, as for any other request. An engine that cannot template (the model has no
chat template, an attached server) refuses it then, with its reason.
"""

from __future__ import annotations

import logging
import traceback
from typing import NamedTuple

from stepview.model.chat import plain_chat
from stepview.model.commands import AddRequest
from stepview.model.engine_api import Engine, EngineRejected
from stepview.model.errors import describe

log = logging.getLogger(__name__)


class Prompt(NamedTuple):
    """What a request runs: its text and, when known up front, its token ids; ``refusal``
    says why it cannot run at all."""

    text: str
    token_ids: tuple[int, ...] = ()
    refusal: str | None = None


def prompt_of(command: AddRequest, engine: Engine | None) -> Prompt:
    """``command``'s prompt; a chat request's templated by ``engine`` (``None``: no engine to
    ask, the request is refused for that by the caller, and shows its messages as text)."""
    if not command.messages:
        return Prompt(command.prompt, command.prompt_token_ids)
    plain = plain_chat(command.messages)
    if engine is None:
        return Prompt(plain)
    try:
        templated = engine.chat_prompt(command.messages)
    except EngineRejected as exc:
        return Prompt(plain, refusal=str(exc))
    except Exception as exc:  # a template that fails to render: this request only
        log.warning("chat template for %s raised\n%s", command.request_id, traceback.format_exc())
        return Prompt(plain, refusal=f"the chat template failed: {describe(exc)}")
    return Prompt(templated.text, templated.token_ids)
