"""What the scheduler decided in one step, as plain data: why a request waits, how the budget went.

vLLM's scheduler says *what* it scheduled; stepview's plug-in also records *why* every other
request was left out (:class:`WaitReason`) and how the step's token budget was spent
(:class:`StepBudget`). The reasons are decided by the rules of the vLLM version in use, next to
the probe that reads them (:mod:`stepview.engine.records.waiting_reasons`); this module only
names them, so the UI, traces and reports can use them without importing the engine.

**The table of wait reasons** (:data:`REASONS`) is the one place a reason is named: its code
(what records, traces, results and the ``reason`` label of the metrics carry), the word the
state column shows after the state (``waiting·kv``), a label and the sentence that explains
it. Everything else derives from it: :data:`WAIT_CODES`, :data:`WORDS`, the metrics' label
values and help text, the text of a reason without figures. vLLM's request states, which give
a blocked request its reason, are the other table
(:mod:`stepview.engine.records.request_states`).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final, NamedTuple

# Why a waiting or preempted request was not scheduled in a step (WaitReason.code).
MAX_NUM_SEQS: Final = "max_num_seqs"  # every running slot is taken
TOKEN_BUDGET: Final = "token_budget"  # max_num_batched_tokens was spent this step
KV_CACHE: Final = "kv_cache"  # not enough free KV blocks
DEFERRED: Final = "deferred"  # vLLM set it aside (grammar, remote KV, LoRA limit, ...)
BEHIND: Final = "behind"  # first come, first served: the request ahead is blocked
NOT_ADMITTED: Final = "not_admitted"  # still in stepview's own queue (--admit-per-step)
UNKNOWN: Final = "unknown"  # nothing this stepview can name (a vLLM status it does not know)


class ReasonWords(NamedTuple):
    """One wait reason, as people are told it."""

    code: str
    word: str  # after the state of a request that waits: ``waiting·kv``
    label: str  # the reason in a few words, where reasons are listed by name
    sentence: str  # what it means, for someone who has not met it


REASONS: Final = (
    ReasonWords(
        MAX_NUM_SEQS, "seqs", "running slots", "every running slot is taken (max_num_seqs)"
    ),
    ReasonWords(
        TOKEN_BUDGET,
        "budget",
        "token budget",
        "the step's token budget (max_num_batched_tokens) was spent before its turn",
    ),
    ReasonWords(
        KV_CACHE,
        "kv",
        "KV cache",
        "too few free KV cache blocks for it, or preempted to free them for running requests",
    ),
    ReasonWords(
        DEFERRED,
        "deferred",
        "set aside",
        "vLLM set it aside and scanned on: blocked on something (a grammar, a remote KV "
        "load, streamed input), over the LoRA limit or a KV-load cap, paused or prefills held",
    ),
    ReasonWords(
        BEHIND,
        "behind",
        "behind another",
        "it is after the request vLLM's scan stopped at, in first come, first served or "
        "priority order",
    ),
    ReasonWords(
        NOT_ADMITTED,
        "unadmitted",
        "not admitted",
        "in stepview's own queue, not handed to vLLM yet",
    ),
    ReasonWords(
        UNKNOWN,
        "unknown",
        "unknown",
        "not known to this stepview: vLLM gave no reason it can name, or a status it does not know",
    ),
)
"""Every wait reason, in the order reasons are listed (the metrics' label values)."""

WAIT_CODES: Final = tuple(reason.code for reason in REASONS)
REASON_OF: Final = MappingProxyType({reason.code: reason for reason in REASONS})
WORDS: Final = MappingProxyType({reason.code: reason.word for reason in REASONS})
"""The state column's word for each code (built once: a lookup per drawn row)."""


class WaitReason(NamedTuple):
    """Why one request was not scheduled in one step.

    ``code`` is one of :data:`WAIT_CODES`; ``text`` says it for a person, with the figures
    ("needs 4 more KV blocks, 1 free"); ``blocker`` names the request ahead for ``behind``.
    """

    code: str
    text: str
    blocker: str | None = None


def unknown_status(name: str) -> WaitReason:
    """The reason of a request in a vLLM status this stepview does not know: said, by name,
    never dropped (a newer vLLM than this stepview's tables)."""
    return WaitReason(UNKNOWN, f"not known to this stepview: {name}")


class StepBudget(NamedTuple):
    """How one engine step spent its token budget and where the KV cache stood after it."""

    max_tokens: int  # max_num_batched_tokens
    prefill_tokens: int  # scheduled for requests still prefilling
    decode_tokens: int  # scheduled for requests generating
    free_blocks: int  # KV cache blocks free after scheduling
    total_blocks: int  # KV cache blocks in all

    @property
    def unused_tokens(self) -> int:
        return max(0, self.max_tokens - self.prefill_tokens - self.decode_tokens)
