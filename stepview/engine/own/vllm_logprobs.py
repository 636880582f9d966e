"""vLLM's logprobs as stepview's tuples, converted lazily: this runs for every sample, every step.

* Sample logprobs are handed over as :class:`LogprobsView`, a length-frozen view over vLLM's
  growing list that converts a position to a tuple of :class:`LogprobEntry` only when read,
  so a driver that copies just the new positions pays O(new tokens) per step, not O(length).
* Prompt logprobs are converted all at once (:func:`convert_prompt_logprobs`); the engine does
  that once per request and hands the same tuple out on every later output.

Both of vLLM's shapes are read: a list of ``{token_id: Logprob}`` dicts, and ``FlatLogprobs``
(flat arrays with per-position start/end indices).
"""

from __future__ import annotations

from typing import Any

from stepview.model.grow import PrefixView
from stepview.model.snapshot import LogprobEntry, PositionLogprobs


def convert_position(candidates: Any) -> PositionLogprobs:
    """vLLM's ``{token_id: Logprob}`` for one position -> tuple of entries, sampled token first.

    vLLM inserts the sampled token first, then the top-k; a dict keeps that order (a sampled
    token that is also in the top-k keeps its first slot).
    """
    return tuple(
        [LogprobEntry(tid, lp.logprob, lp.rank, lp.decoded_token) for tid, lp in candidates.items()]
    )


def _convert_flat_position(flat: Any, index: int) -> PositionLogprobs:
    """One position of a ``vllm.logprobs.FlatLogprobs``, read from its arrays (no dicts)."""
    start = flat.start_indices[index]
    end = flat.end_indices[index]
    token_ids = flat.token_ids
    logprobs = flat.logprobs
    ranks = flat.ranks
    decoded = flat.decoded_tokens
    seen: set[int] = set()
    out: list[LogprobEntry] = []
    for j in range(start, end):
        tid = token_ids[j]
        if tid in seen:  # the sampled token again, as a top-k member
            continue
        seen.add(tid)
        out.append(LogprobEntry(tid, logprobs[j], ranks[j], decoded[j]))
    return tuple(out)


class LogprobsView(PrefixView[PositionLogprobs]):
    """The first ``len`` positions of vLLM's live sample logprobs, converted on access.

    vLLM's list only ever grows, so positions below the length frozen at creation never
    change; the view is nonetheless meant to be read before the next ``step()``. Each read
    converts again: copy only the positions you do not have yet (``view[len(kept):]``).
    """

    __slots__ = ("_flat", "_live")

    def __init__(self, live: Any) -> None:
        super().__init__(len(live))
        self._live = live
        self._flat = hasattr(live, "start_indices")

    def _at(self, index: int) -> PositionLogprobs:
        if self._flat:
            return _convert_flat_position(self._live, index)
        return convert_position(self._live[index])


def convert_prompt_logprobs(prompt_logprobs: Any) -> tuple[PositionLogprobs | None, ...]:
    """All prompt positions at once (the first is ``None``: nothing precedes it)."""
    if hasattr(prompt_logprobs, "start_indices"):
        return tuple(
            _convert_flat_position(prompt_logprobs, i) or None for i in range(len(prompt_logprobs))
        )
    return tuple(None if c is None else convert_position(c) for c in prompt_logprobs)
