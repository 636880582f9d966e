"""What the scheduler decided in one step, as plain data: why a request waits, how the budget went.

vLLM's scheduler says *what* it scheduled; stepview's plug-in also records *why* every other
request was left out (:class:`WaitReason`) and how the step's token budget was spent
(:class:`StepBudget`). The reasons are decided by the rules of the vLLM version in use, next to
the probe that reads them (:mod:`stepview.engine.records.waiting_reasons`); this module only
names them, so the UI, traces and reports can use them without importing the engine.
"""

from __future__ import annotations

from typing import Final, NamedTuple

# Why a waiting or preempted request was not scheduled in a step (WaitReason.code).
MAX_NUM_SEQS: Final = "max_num_seqs"  # every running slot is taken
TOKEN_BUDGET: Final = "token_budget"  # max_num_batched_tokens was spent this step
KV_CACHE: Final = "kv_cache"  # not enough free KV blocks
DEFERRED: Final = "deferred"  # vLLM set it aside (grammar, remote KV, LoRA limit, ...)
BEHIND: Final = "behind"  # first come, first served: the request ahead is blocked
NOT_ADMITTED: Final = "not_admitted"  # still in stepview's own queue (--admit-per-step)
WAIT_CODES: Final = (MAX_NUM_SEQS, TOKEN_BUDGET, KV_CACHE, DEFERRED, BEHIND, NOT_ADMITTED)


class WaitReason(NamedTuple):
    """Why one request was not scheduled in one step.

    ``code`` is one of :data:`WAIT_CODES`; ``text`` says it for a person, with the figures
    ("needs 4 more KV blocks, 1 free"); ``blocker`` names the request ahead for ``behind``.
    """

    code: str
    text: str
    blocker: str | None = None


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
