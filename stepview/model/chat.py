"""Chat requests as plain data: the messages a chat request is made of, and their JSON form.

A chat request is a conversation (``system`` / ``user`` / ``assistant`` messages) that the
engine turns into one prompt with the model's chat template, as vLLM's ``LLM.chat`` and
``/v1/chat/completions`` do. The engine alone can apply the template (only it holds the
tokenizer), so the messages travel to it as data: in an ``AddRequest``, in a prompts file's
``"messages"`` key, in the results record (so that a results file fed back reproduces the
request), and in a clone's draft.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

ROLES = ("system", "user", "assistant")

NO_CHAT_TEMPLATE = "this model has no chat template"
"""Why a chat request is refused by an engine whose tokenizer carries no chat template."""

ATTACHED_NO_CHAT = "no chat on an attached server: stepview adds plain prompts (/v1/completions)"
"""Why a chat request is refused when watching a server (see docs/attach-and-fleet.md)."""


def chat_unavailable(chat_template: bool, attached: str) -> str:
    """Why the engine described takes no chat requests (``""``: it does)."""
    if attached:
        return ATTACHED_NO_CHAT
    return "" if chat_template else NO_CHAT_TEMPLATE


class ChatMessage(NamedTuple):
    """One message of a conversation, as vLLM's chat API takes it."""

    role: str
    content: str


Chat = tuple[ChatMessage, ...]


def chat_from_json(data: Any) -> Chat:
    """``[{"role": ..., "content": ...}, ...]`` as messages; ``ValueError`` says what is wrong.

    The list must not be empty; each message has exactly a known role and a string content.
    """
    if not isinstance(data, list) or not data:
        raise ValueError('"messages" must be a non-empty list of {"role": ..., "content": ...}')
    messages: list[ChatMessage] = []
    for number, item in enumerate(data, start=1):
        where = f'"messages" item {number}'
        if not isinstance(item, dict):
            raise ValueError(f'{where} must be an object like {{"role": "user", "content": "..."}}')
        unknown = sorted(set(item) - {"role", "content"})
        if unknown:
            raise ValueError(
                f"{where}: unknown key(s) {', '.join(unknown)} (expected role, content)"
            )
        role = item.get("role")
        if role not in ROLES:
            raise ValueError(f'{where}: "role" must be one of {", ".join(ROLES)}, got {role!r}')
        content = item.get("content")
        if not isinstance(content, str):
            raise ValueError(f'{where}: "content" must be a string')
        messages.append(ChatMessage(role, content))
    if not any(m.content.strip() for m in messages if m.role == "user"):
        raise ValueError('"messages" has no user message with text')
    return tuple(messages)


def chat_to_json(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
    """The messages as vLLM's chat API (and a prompts file) take them."""
    return [{"role": m.role, "content": m.content} for m in messages]


def plain_chat(messages: Sequence[ChatMessage]) -> str:
    """The messages as readable text, for a chat request that was never templated (refused)."""
    return "\n".join(f"{m.role}: {m.content}" for m in messages)


def user_turn(text: str, history: Sequence[ChatMessage] = ()) -> Chat:
    """``history`` followed by ``text`` as the user's message: what the add form's chat sends."""
    return (*history, ChatMessage("user", text))


def split_last_user(messages: Sequence[ChatMessage]) -> tuple[Chat, str]:
    """The messages before the last one and its text when it is the user's (what a clone puts
    in the form's prompt box); all of them and ``""`` otherwise."""
    if messages and messages[-1].role == "user":
        return tuple(messages[:-1]), messages[-1].content
    return tuple(messages), ""


def headline(prompt: str, messages: Chat) -> str:
    """What a one-line view of a request shows as its prompt: for a chat request its last user
    message (the templated prompt starts with the same system boilerplate in every request;
    the detail view shows it whole), else the prompt."""
    for message in reversed(messages):
        if message.role == "user":
            return message.content
    return prompt
