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

Plain data, like the rest of ``model``: the UI's form and presets use the seed prompts, and
reading a file or standard input (and naming its lines in errors) is
:mod:`stepview.files.prompts_file`'s.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from stepview.model.chat import Chat, chat_from_json
from stepview.model.commands import AddRequest
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

    def request(self, request_id: str) -> AddRequest:
        """The line as the command that adds it, under ``request_id``."""
        return AddRequest(request_id, self.prompt, self.spec, messages=self.messages)


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
    if not isinstance(data, dict):
        raise ValueError('expected a JSON object like {"prompt": "...", "params": {...}}')
    if "state" in data:  # a results record: what made the request, nothing else
        record = data
        data = {k: record[k] for k in ("id", "params") if record.get(k) is not None}
        if record.get("messages"):
            data["messages"] = record["messages"]
        else:
            data["prompt"] = record.get("prompt")
    unknown = sorted(set(data) - {"id", "prompt", "messages", "params", "at"})
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(unknown)} (expected id, prompt or messages, params, at)"
        )
    at = data.get("at")
    if at is not None and (
        isinstance(at, bool) or not isinstance(at, int | float) or not 0 <= at < math.inf
    ):
        raise ValueError(f'"at" must be a number of seconds, 0 or more, got {at!r}')
    messages: Chat = ()
    if "messages" in data:
        if "prompt" in data:
            raise ValueError('give "prompt" or "messages" (a chat), not both')
        messages = chat_from_json(data["messages"])
    if not messages and "prompt" not in data:
        raise ValueError('no "prompt" (or "messages", for a chat)')
    text = data.get("prompt", "")
    if not messages and not isinstance(text, str):
        raise ValueError('"prompt" must be a string (or give "messages" for a chat)')
    if not messages and not text:
        raise ValueError('"prompt" is empty')
    prompt = "" if messages else str(text)
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
    return PromptLine(0, request_id, prompt, spec, at_seconds, messages)
