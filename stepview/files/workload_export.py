"""``--export-workload``: a recorded run's workload as a file another run replays.

Two formats, of the same :class:`~stepview.trace.workload.Workload` (so they and ``--rerun``
never disagree about what the workload was):

``FILE``
    stepview's own prompts file (:mod:`stepview.model.prompts`): one line per request with
    its id, prompt (text, chat ``messages`` or ``prompt_token_ids``), full sampling parameters
    (the recorded length held as ``--rerun`` holds it) and ``"at"``, its arrival in seconds
    after the engine is up. ``#`` lines at the top say where it came from, which requests had
    their length forced and which could not be rebuilt. Edit it by hand and run it with
    ``stepview --prompts FILE``.
``vllm:FILE``
    the JSON Lines that vLLM's own benchmark replays with its ``timed_trace`` dataset
    (``vllm bench serve --dataset-name timed_trace --dataset-path FILE``, vLLM 0.32 on): per
    sample, ``timestamp`` (seconds from the start), ``input_length``, ``output_length`` and
    ``hash_ids``. vLLM makes a prompt of random tokens per hash id, the same tokens for the
    same id, so the ids carry the prompts' shared prefixes: here one id per KV cache block of
    prompt tokens, numbered by the block's content *and everything before it* (as vLLM's
    prefix cache hashes blocks), so two prompts share ids exactly as far as they share whole
    blocks. The benchmark has to cut its prompts into blocks of the same size
    (``--timed-trace-chunk-hash-size``; :func:`timed_trace_command` says which). It sends one
    completion per line, so a request of ``n`` samples is ``n`` lines, as the engine core
    holds it; its outputs run to ``output_length`` (the benchmark sets ``ignore_eos``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stepview.model.chat import chat_to_json
from stepview.trace.workload import Skipped, Workload, WorkloadRequest

VLLM_PREFIX = "vllm:"
"""``--export-workload vllm:FILE`` writes vLLM's ``timed_trace`` format (``./vllm:x`` is a file
named ``vllm:x`` in stepview's own format, as ``./-`` is a file named ``-``)."""

DEFAULT_BLOCK_SIZE = 16
"""Tokens per hash id when the trace does not say its engine's block size: vLLM's default
block on a GPU, and its benchmark's default ``--timed-trace-chunk-hash-size``."""


def workload_target(text: str) -> tuple[bool, Path]:
    """``--export-workload``'s value: whether it asks for vLLM's format, and the file."""
    if text.startswith(VLLM_PREFIX):
        return True, Path(text.removeprefix(VLLM_PREFIX))
    return False, Path(text)


# -- stepview's prompts file -----------------------------------------------------------------


def prompts_line(item: WorkloadRequest) -> dict[str, Any]:
    """One request as a prompts file's line (:func:`~stepview.model.prompts.parse_prompt_line`
    reads it back as the same request)."""
    request = item.request
    line: dict[str, Any] = {"id": request.request_id}
    if request.messages:
        line["messages"] = chat_to_json(request.messages)
    elif request.prompt_token_ids:
        line["prompt_token_ids"] = list(request.prompt_token_ids)
    else:
        line["prompt"] = request.prompt
    line["params"] = request.spec.to_dict()
    line["at"] = round(item.at, 6)
    return line


def prompts_file_lines(workload: Workload, source: str) -> Iterator[str]:
    """The whole prompts file: ``#`` lines saying what it is, then one line per request."""
    yield f"# the workload of {source}: {len(workload.requests)} request(s)"
    yield '# "at": seconds after the engine is up; run with: stepview --prompts THIS_FILE'
    forced = workload.forced
    if forced:
        yield (
            f"# {len(forced)} with their recorded output length forced (ignore_eos, "
            f"max_tokens): {' '.join(forced)}"
        )
    for skipped in workload.skipped:
        yield f"# skipped {skipped.request_id}: {skipped.why}"
    for item in workload.requests:
        yield json.dumps(prompts_line(item), ensure_ascii=False)


# -- vLLM's timed_trace ----------------------------------------------------------------------


class BlockIds:
    """Numbers each block of prompt tokens by its content and the blocks before it."""

    def __init__(self, block_size: int) -> None:
        if block_size < 1:
            raise ValueError(f"a block holds 1 token or more, got {block_size}")
        self.block_size = block_size
        self._ids: dict[tuple[int, tuple[int, ...]], int] = {}

    def of(self, token_ids: tuple[int, ...]) -> list[int]:
        """The hash ids of a prompt: one per block, the last one possibly partial."""
        size = self.block_size
        ids = self._ids
        parent = -1
        out: list[int] = []
        for start in range(0, len(token_ids), size):
            key = (parent, token_ids[start : start + size])
            parent = ids.setdefault(key, len(ids))
            out.append(parent)
        return out


def timed_trace_lines(workload: Workload) -> tuple[list[dict[str, Any]], list[Skipped]]:
    """vLLM's ``timed_trace`` lines of ``workload`` (one per sample, in order of arrival),
    and the requests left out: those whose prompt was never tokenized (rejected before)."""
    blocks = BlockIds(workload.block_size or DEFAULT_BLOCK_SIZE)
    lines: list[dict[str, Any]] = []
    skipped = list(workload.skipped)
    for item in workload.requests:
        prompt = item.prompt_token_ids or item.request.prompt_token_ids
        if not prompt:
            skipped.append(Skipped(item.request_id, "its prompt was never tokenized"))
            continue
        hash_ids = blocks.of(prompt)
        spec = item.request.spec
        outputs = item.output_tokens or (0,) * spec.n
        for tokens in outputs:
            lines.append(
                {
                    "timestamp": round(item.at, 6),
                    "input_length": len(prompt),
                    "output_length": tokens or spec.max_tokens,
                    "hash_ids": hash_ids,
                    "id": item.request_id,
                }
            )
    return lines, skipped


def timed_trace_command(path: Path, lines: int, block_size: int) -> str:
    """The ``vllm bench serve`` flags that replay the ``lines`` of the file at ``path``."""
    return (
        f"vllm bench serve --dataset-name timed_trace --dataset-path {path} "
        f"--timed-trace-chunk-hash-size {block_size or DEFAULT_BLOCK_SIZE} --num-prompts {lines}"
    )


def write_workload(
    path: Path, workload: Workload, *, vllm: bool, source: str
) -> tuple[int, list[Skipped]]:
    """Write ``workload`` to ``path`` in stepview's format or vLLM's (``vllm``); how many
    requests (vLLM's: samples) it holds, and the requests left out, each with its reason.
    Raises ``OSError``."""
    if vllm:
        lines, skipped = timed_trace_lines(workload)
        count = len(lines)
        text = "".join(json.dumps(line) + "\n" for line in lines)
    else:
        skipped = list(workload.skipped)
        count = len(workload.requests)
        text = "".join(line + "\n" for line in prompts_file_lines(workload, source))
    path.write_text(text, encoding="utf-8")
    return count, skipped
