"""The prompts file format (JSONL), one line at a time, and the seed example's three prompts.

A prompts file has one JSON object per line, in the same shape as a results record, so a
results file can be fed straight back in::

    {"prompt": "To be or not to be,", "params": {"temperature": 0.8, "top_k": 5}}
    {"id": "greedy-1", "prompt": "A robot may", "params": {"temperature": 0, "logprobs": 1}}

``id`` is optional (a unique one is made), ``params`` is optional (vLLM's defaults), blank
lines and lines starting with ``#`` are skipped. A chat request gives ``messages`` instead of
``prompt`` (exactly one of the two); the engine applies the model's chat template to them::

    {"messages": [{"role": "user", "content": "What is the capital of Germany?"}]}

A results record (it has a ``state``) is read for its ``id``, ``params`` and prompt, its other
fields ignored; a chat request's record holds both its templated ``prompt`` and its
``messages``, and the messages are what it is made of. ``at`` (seconds, 0 or more) replays a real
arrival pattern: the request arrives that long after the engine is up, on the driver's clock,
instead of at once (``{"prompt": "...", "at": 2.5}``).

``prompt_token_ids`` gives the prompt as token ids instead of text (exactly one of ``prompt``,
``messages`` and ``prompt_token_ids``): the engine runs those tokens as they are, as a synthetic
load's prompts and an attached server's recorded ones can only be given (``stepview --replay
TRACE --export-workload FILE`` writes them so). The panes name such a prompt by its length,
``(12 token ids)`` (:func:`token_ids_name`). A results record of such a request holds that name
as its ``prompt``: fed back, it is read for its ``prompt_token_ids`` instead
(:func:`names_token_ids`).

Plain data, like the rest of ``model``: the UI's form and presets use the seed prompts, and
reading a file or standard input (and naming its lines in errors) is
:mod:`stepview.files.prompts_file`'s.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stepview.model.chat import Chat, chat_from_json
from stepview.model.commands import AddRequest
from stepview.model.outside_text import lone_surrogate, may_hold_surrogates
from stepview.model.sampling import DEFAULT_MAX_LOGPROBS, SamplingSpec

# vLLM's examples/offline_inference/llm_engine_example.py, with its exact sampling parameters.
SEED_PROMPTS: tuple[tuple[str, SamplingSpec], ...] = (
    (
        "A robot may not injure a human being",
        SamplingSpec(temperature=0.0, logprobs=1, prompt_logprobs=1),
    ),
    (
        "To be or not to be,",
        SamplingSpec(temperature=0.8, top_k=5, presence_penalty=0.2),
    ),
    (
        "What is the meaning of life?",
        SamplingSpec(n=2, temperature=0.8, top_p=0.95, frequency_penalty=0.1),
    ),
)


@dataclass(frozen=True, slots=True)
class PromptLine:
    line: int
    request_id: str | None
    prompt: str
    spec: SamplingSpec
    at: float | None = None
    messages: Chat = ()  # a chat request (``prompt`` is then empty)
    token_ids: tuple[int, ...] = ()  # a prompt given as ids (``prompt`` is then their name)

    def request(self, request_id: str) -> AddRequest:
        """The line as the command that adds it, under ``request_id``."""
        return AddRequest(
            request_id, self.prompt, self.spec, self.token_ids, messages=self.messages
        )


TOKEN_IDS_NAME = re.compile(
    r"\((?:synthetic [a-z]+: )?(\d+) (?:random token ids|token ids|prompt tokens)\)"
)
"""The names a prompt known only as token ids is shown by: :func:`token_ids_name`'s, a synthetic
load's (:func:`~stepview.model.load.plan_load`) and a watched server's request before (or
without) its text (``(12 prompt tokens)``)."""


def token_ids_name(count: int) -> str:
    """What a prompt given as ``count`` token ids is called where its text would show."""
    return f"({count} token ids)"


def names_token_ids(prompt: str, token_ids: Sequence[int]) -> bool:
    """True when ``prompt`` is only the name of the ``token_ids`` the request ran, not text:
    one of :data:`TOKEN_IDS_NAME`, with as many ids as it says.

    A request given as ids shows such a name; nothing else in a recording tells it from one
    given as text (both hold the ids the engine ran), and running the name as text would be
    a different prompt altogether.
    """
    match = TOKEN_IDS_NAME.fullmatch(prompt)
    return match is not None and int(match.group(1)) == len(token_ids)


def seed_requests(prefix: str = "") -> list[AddRequest]:
    """The seed's three prompts as commands, with ids ``0``, ``1``, ``2`` (as in the seed)."""
    return [AddRequest(f"{prefix}{i}", p, spec) for i, (p, spec) in enumerate(SEED_PROMPTS)]


def parse_prompt_line(text: str, max_logprobs: int = DEFAULT_MAX_LOGPROBS) -> PromptLine | None:
    """One line of a prompts file; ``None`` for a blank or comment line.

    Raises ``ValueError`` with the problem (without the line number).
    """
    stripped = text.strip()
    if not stripped or stripped.startswith("#"):
        return None
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ValueError("not valid JSON here (nested deeper than Python reads)") from None
    lone = lone_surrogate(data) if may_hold_surrogates(stripped) else None
    if lone is not None:  # no file, no engine could take it on
        raise ValueError(f"not valid Unicode: a lone surrogate ({lone})")
    if not isinstance(data, dict):
        raise ValueError('expected a JSON object like {"prompt": "...", "params": {...}}')
    if "state" in data:  # a results record: what made the request, nothing else
        data = _made_of(data)
    unknown = sorted(set(data) - {"id", *_PROMPT_KEYS, "params", "at"})
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(unknown)} (expected id, prompt, messages or "
            "prompt_token_ids, params, at)"
        )
    at = data.get("at")
    if at is not None and (
        isinstance(at, bool) or not isinstance(at, int | float) or not 0 <= at < math.inf
    ):
        raise ValueError(f'"at" must be a number of seconds, 0 or more, got {at!r}')
    given = [key for key in _PROMPT_KEYS if key in data]
    if len(given) > 1:
        chat = " (a chat)" if "messages" in given else ""
        raise ValueError(f'give "{given[0]}" or "{given[1]}"{chat}, not both')
    if not given:
        raise ValueError('no "prompt" (or "messages", for a chat) and no "prompt_token_ids"')
    messages: Chat = ()
    token_ids: tuple[int, ...] = ()
    if "messages" in data:
        messages = chat_from_json(data["messages"])
        prompt = ""
    elif "prompt_token_ids" in data:
        token_ids = _token_ids(data["prompt_token_ids"])
        prompt = token_ids_name(len(token_ids))
    else:
        prompt = data["prompt"]
        if not isinstance(prompt, str):
            raise ValueError('"prompt" must be a string (or give "messages" for a chat)')
        if not prompt:
            raise ValueError('"prompt" is empty')
    request_id = data.get("id")
    if request_id is not None and not isinstance(request_id, str | int):
        raise ValueError('"id" must be a string')
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise ValueError('"params" must be an object of sampling parameters')
    spec = SamplingSpec.from_dict(params)
    errors = spec.errors(max_logprobs)
    if errors:
        raise ValueError("; ".join(errors.values()))
    at_seconds = None if at is None else float(at)
    request_id = None if request_id is None else str(request_id)
    return PromptLine(0, request_id, prompt, spec, at_seconds, messages, token_ids)


_PROMPT_KEYS = ("prompt", "messages", "prompt_token_ids")


def _made_of(record: dict[str, Any]) -> dict[str, Any]:
    """What made the request of a results record: its id, params, and its messages, its
    token ids (a prompt shown by :func:`token_ids_name`) or its prompt text."""
    data = {k: record[k] for k in ("id", "params") if record.get(k) is not None}
    prompt, ids = record.get("prompt"), record.get("prompt_token_ids")
    if record.get("messages"):
        data["messages"] = record["messages"]
    elif isinstance(prompt, str) and isinstance(ids, list) and names_token_ids(prompt, ids):
        data["prompt_token_ids"] = ids
    else:
        data["prompt"] = prompt
    return data


def _token_ids(value: object) -> tuple[int, ...]:
    """A line's ``prompt_token_ids``: a non-empty list of token ids (whole numbers, 0 or more)."""
    if not isinstance(value, list) or not value:
        raise ValueError('"prompt_token_ids" must be a non-empty list of token ids')
    for token in value:
        if isinstance(token, bool) or not isinstance(token, int) or token < 0:
            raise ValueError(f'"prompt_token_ids" must hold token ids (0 or more), got {token!r}')
    return tuple(value)
