"""Finished requests as JSON records, and as text in the form of vLLM's ``RequestOutput``.

One record shape serves ``--headless --json`` and the results file that keeps every finished
request of a run: a plain dict with readable names (logprobs as ``{"token_id": ...}`` objects),
for people and tools. Only a prompts file reads it back (its id, parameters and prompt or
chat ``messages``: the request again); traces have their own compact form
(:mod:`stepview.trace.format`), which a replay does read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stepview.model.chat import chat_to_json
from stepview.model.latency import request_latency
from stepview.model.snapshot import (
    Completion,
    PositionLogprobs,
    RequestState,
    RequestView,
)


def _logprobs_out(
    positions: Sequence[PositionLogprobs | None],
) -> list[list[dict[str, Any]] | None]:
    return [
        None
        if entries is None
        else [
            {"token_id": e.token_id, "logprob": e.logprob, "rank": e.rank, "decoded": e.decoded}
            for e in entries
        ]
        for entries in positions
    ]


def completion_record(c: Completion) -> dict[str, Any]:
    return {
        "index": c.index,
        "text": c.text,
        "token_ids": list(c.token_ids),
        "finish_reason": c.finish_reason,
        "stop_reason": c.stop_reason,
        "cumulative_logprob": c.cumulative_logprob,
        "logprobs": None if c.logprobs is None else _logprobs_out(c.logprobs),
    }


def _derived_timings(view: RequestView) -> dict[str, float | None]:
    """The figures of :func:`~stepview.model.latency.request_latency` under the record's
    names, rounded to the microsecond; no clock, so a figure not reached yet is ``None``."""

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 6)

    lat = request_latency(view)
    return {
        "queue_time": rounded(lat.queue),
        "ttft": rounded(lat.ttft),
        "e2e": rounded(lat.e2e),
    }


Annotate = Callable[[str], Mapping[str, Any]]
"""More fields for a request's record, by request id (its ``timeline``, ``preemptions``)."""


def request_record(view: RequestView, annotate: Annotate | None = None) -> dict[str, Any]:
    """A JSON-ready dict with everything about one request (and ``annotate``'s fields)."""
    t = view.timings
    record: dict[str, Any] = {
        "id": view.request_id,
        "parent": None if view.lineage is None else view.lineage.parent,
        "lineage": None if view.lineage is None else view.lineage.to_record(),
        "prompt": view.prompt,  # a chat request's: its messages, templated
        "messages": chat_to_json(view.messages) if view.messages else None,
        "params": view.spec.to_dict(),
        "state": view.state.value,
        "error": view.error,
        "prompt_tokens": view.prompt_tokens,
        "computed_prompt_tokens": view.computed_prompt_tokens,
        "prompt_token_ids": list(view.prompt_token_ids),
        "prompt_logprobs": (
            None if view.prompt_logprobs is None else _logprobs_out(view.prompt_logprobs)
        ),
        "num_preemptions": view.num_preemptions,
        # The most KV cache blocks it held, and prompt tokens the prefix cache spared it
        # (0 without the scheduler plug-in, which is what tells them).
        "kv_peak_blocks": view.peak_kv_blocks,
        "cached_prompt_tokens": view.cached_prompt_tokens,
        "completions": [completion_record(c) for c in view.completions],
        "timings": {
            "arrival": t.arrival,
            "scheduled": t.scheduled,
            "first_token": t.first_token,
            "finished": t.finished,
            **_derived_timings(view),
        },
    }
    if annotate is not None:
        record.update(annotate(view.request_id))
    return record


# -- vLLM's RequestOutput form -----------------------------------------------------------------


def _repr_logprobs(positions: Sequence[PositionLogprobs | None] | None) -> str:
    if positions is None:
        return "None"
    parts = []
    for entries in positions:
        if entries is None:
            parts.append("None")
            continue
        inner = ", ".join(
            f"{e.token_id}: Logprob(logprob={e.logprob}, rank={e.rank}, "
            f"decoded_token={e.decoded!r})"
            for e in entries
        )
        parts.append("{" + inner + "}")
    return "[" + ", ".join(parts) + "]"


def format_request_output(view: RequestView) -> str:
    """The request as ``print(request_output)`` shows it in vLLM's example, with all n samples.

    vLLM's own final ``RequestOutput`` for n > 1 carries only the last sample to finish; this
    lists every one, in index order.
    """
    outputs = ", ".join(
        f"CompletionOutput(index={c.index}, text={c.text!r}, token_ids={list(c.token_ids)}, "
        f"cumulative_logprob={c.cumulative_logprob}, logprobs={_repr_logprobs(c.logprobs)}, "
        f"finish_reason={c.finish_reason}, stop_reason={c.stop_reason})"
        for c in view.completions
    )
    return (
        f"RequestOutput(request_id={view.request_id}, prompt={view.prompt!r}, "
        f"prompt_token_ids={list(view.prompt_token_ids)}, "
        f"prompt_logprobs={_repr_logprobs(view.prompt_logprobs)}, "
        f"outputs=[{outputs}], finished={view.state is RequestState.FINISHED})"
    )
