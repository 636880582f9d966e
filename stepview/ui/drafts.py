"""Clones and forks as drafts for the add form: prompt, parameters and parent.

How a fork's text is rebuilt (:func:`token_texts`): the driver keeps a completion's text as
the pieces each step appended, which is one piece per token in an ordinary decode; when the
counts match those pieces are used, since they are exactly the text vLLM returned. Otherwise
(a step that appended several tokens, or text held back for a stop string) the chosen tokens'
decoded logprob entries are used. Without either there is no per-token text, and no fork.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from stepview.model.chat import Chat
from stepview.model.lineage import Lineage, LineageKind
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import Completion, RequestView


@dataclass(frozen=True, slots=True)
class Draft:
    """A request to put in the add form before it is sent: prompt, parameters, parent."""

    prompt: str
    spec: SamplingSpec
    lineage: Lineage | None = None
    messages: Chat = ()  # a chat request's conversation (``prompt`` is then unused)


class AskToAdd(Message):
    """A screen asks the app to open the add form prefilled with ``draft`` (a fork)."""

    def __init__(self, draft: Draft) -> None:
        super().__init__()
        self.draft = draft


def token_texts(completion: Completion) -> list[str] | None:
    """The text of each generated token, or ``None`` when it cannot be told (module docstring)."""
    count = len(completion.token_ids)
    if len(completion.pieces) == count:
        return list(completion.pieces)
    logprobs = completion.logprobs
    if logprobs is None or len(logprobs) < count:
        return None
    texts: list[str] = []
    for entries in logprobs[:count]:
        if not entries or entries[0].decoded is None:
            return None
        texts.append(entries[0].decoded)
    return texts


def clone_of(view: RequestView) -> Draft:
    """The same prompt and parameters, to be changed in the form; a chat request's messages
    (the form shows the user's text, not the templated prompt)."""
    lineage = Lineage(view.request_id, LineageKind.CLONE)
    return Draft(view.prompt, view.spec, lineage, view.messages)


def fork_of(view: RequestView, completion: int, token: int) -> Draft | None:
    """The prompt plus sample ``completion`` up to and including ``token``; ``None`` when that
    sample has no such token or its per-token text is unknown. A chat request's fork is a
    plain prompt: its templated text, continued in the assistant's turn."""
    sample = next((c for c in view.completions if c.index == completion), None)
    texts = None if sample is None else token_texts(sample)
    if texts is None or not 0 <= token < len(texts):
        return None
    prompt = view.prompt + "".join(texts[: token + 1])
    lineage = Lineage(view.request_id, LineageKind.FORK, completion, token)
    return Draft(prompt, view.spec, lineage)
