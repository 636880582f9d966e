"""Prompts files (JSONL) and the seed example's three demo prompts.

A prompts file has one JSON object per line, in the same shape as a results record, so a
results file can be fed straight back in::

    {"prompt": "To be or not to be,", "params": {"temperature": 0.8, "top_k": 5}}
    {"id": "greedy-1", "prompt": "A robot may", "params": {"temperature": 0, "logprobs": 1}}

``id`` is optional (a unique one is made), ``params`` is optional (vLLM's defaults), blank
lines and lines starting with ``#`` are skipped. ``at`` (seconds, 0 or more) replays a real
arrival pattern: the request arrives that long after the engine is up, on the driver's clock,
instead of at once (``{"prompt": "...", "at": 2.5}``). Every line is checked before anything runs,
so a typo on line 9,000 does not surface after 8,999 requests have been served.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from stepview.model.commands import AddRequest, Arrival, Command, Schedule
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


class PromptsFileError(Exception):
    """A prompts file that cannot be used; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class PromptLine:
    line: int
    request_id: str | None
    prompt: str
    spec: SamplingSpec
    at: float | None = None


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
    unknown = sorted(set(data) - {"id", "prompt", "params", "at"})
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)} (expected id, prompt, params, at)")
    at = data.get("at")
    if at is not None and (
        isinstance(at, bool) or not isinstance(at, int | float) or not 0 <= at < math.inf
    ):
        raise ValueError(f'"at" must be a number of seconds, 0 or more, got {at!r}')
    prompt = data.get("prompt")
    if not isinstance(prompt, str):
        raise ValueError('"prompt" must be a string')
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
    return PromptLine(0, None if request_id is None else str(request_id), prompt, spec, at_seconds)


def _read_lines(path: Path) -> list[bytes]:
    """The file's lines as bytes (decoded one by one, so an encoding error names its line).

    Opened non-blocking: a named pipe that nobody writes to would otherwise hang the start
    with a blank terminal; read this way it is simply empty. A pipe with a writer (``--prompts
    <(generate)``) is read in full, blocking as usual once open.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.set_blocking(fd, True)
        with open(fd, "rb", closefd=False) as handle:
            return handle.readlines()
    finally:
        os.close(fd)


def read_prompts(path: Path, max_logprobs: int = DEFAULT_MAX_LOGPROBS) -> list[AddRequest]:
    """Every request of a prompts file, ``"at"`` or not (see :func:`read_timed_prompts`)."""
    return [request for _, request in read_timed_prompts(path, max_logprobs)]


def prompt_commands(path: Path, max_logprobs: int = DEFAULT_MAX_LOGPROBS) -> list[Command]:
    """A prompts file as commands for the driver: the lines without ``"at"`` as
    :class:`AddRequest` (added at once), those with it in one :class:`Schedule`."""
    timed = read_timed_prompts(path, max_logprobs)
    commands: list[Command] = [request for at, request in timed if at is None]
    arrivals = tuple(Arrival(at, request) for at, request in timed if at is not None)
    if arrivals:
        commands.append(Schedule(arrivals))
    return commands


def read_timed_prompts(
    path: Path, max_logprobs: int = DEFAULT_MAX_LOGPROBS
) -> list[tuple[float | None, AddRequest]]:
    """Read and check a whole prompts file: each request with its ``"at"`` (``None``: at once).

    :class:`PromptsFileError` names the first bad line.
    """
    try:
        raw_lines = _read_lines(path)
    except OSError as exc:
        raise PromptsFileError(f"cannot read prompts file {path}: {exc.strerror or exc}") from None
    requests: list[tuple[float | None, AddRequest]] = []
    seen: set[str] = set()
    for number, raw in enumerate(raw_lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PromptsFileError(
                f"{path}:{number}: not UTF-8 text (byte {exc.start + 1} of the line)"
            ) from None
        try:
            parsed = parse_prompt_line(text, max_logprobs)
        except ValueError as exc:
            raise PromptsFileError(f"{path}:{number}: {exc}") from None
        if parsed is None:
            continue
        request_id = parsed.request_id or str(len(requests))
        if request_id in seen:
            raise PromptsFileError(f"{path}:{number}: duplicate id {request_id!r}")
        seen.add(request_id)
        requests.append((parsed.at, AddRequest(request_id, parsed.prompt, parsed.spec)))
    if not requests:
        raise PromptsFileError(f"{path}: no prompts in the file")
    return requests
