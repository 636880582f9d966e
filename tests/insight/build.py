"""Hand-built snapshots for the insight tests: a request's views step by step."""

from __future__ import annotations

from collections.abc import Sequence

from stepview.model.grow import Frozen
from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import WaitReason
from stepview.model.snapshot import (
    Completion,
    EngineCounters,
    EngineState,
    RequestState,
    RequestView,
    StepSnapshot,
    Timings,
)

S = RequestState


def view(
    rid: str,
    state: RequestState,
    *,
    arrival: float = 0.0,
    scheduled: float | None = None,
    first_token: float | None = None,
    finished: float | None = None,
    prompt: int = 100,
    computed: int = 0,
    out: int = 0,
    preemptions: int = 0,
    reason: str | None = None,
) -> RequestView:
    return RequestView(
        rid,
        "p",
        SamplingSpec(),
        state,
        Timings(arrival, scheduled, first_token, finished),
        prompt_tokens=prompt,
        computed_prompt_tokens=computed,
        num_preemptions=preemptions,
        completions=(Completion(0, token_ids=Frozen(list(range(out)))),) if out else (),
        wait_reason=None if reason is None else WaitReason(reason, reason),
    )


def snap(
    step: int,
    clock: float,
    active: Sequence[RequestView] = (),
    finished: Sequence[RequestView] = (),
    *,
    step_time: float = 0.0,
    kv: float = 0.0,
    waiting: int = 0,
    prompt_tokens: int = 0,
    generation_tokens: int = 0,
    total_generated: int = 0,
) -> StepSnapshot:
    return StepSnapshot(
        step=step,
        clock=clock,
        engine_state=EngineState.RUNNING,
        step_time=step_time,
        counters=EngineCounters(
            waiting=waiting,
            kv_cache_usage=kv,
            prompt_tokens=prompt_tokens,
            generation_tokens=generation_tokens,
        ),
        active=tuple(active),
        finished=Frozen(list(finished)),
        total_generated=total_generated,
    )
