"""A short run told step by step: chunked prefill, a request held for KV blocks, a preemption.

Twelve hand-made snapshots (steps 0 to 11) of a 64-token budget and a 16-block KV cache:

* ``s1`` (96 prompt tokens) is prefilled in two chunks (64 + 32), decodes, is preempted at
  step 6 with 99 computed tokens lost, waits for KV blocks, is prefilled again and finishes;
* ``s2`` waits one step for the token budget, then prefills and decodes to the end at step 7;
* ``s3`` arrives at step 2 and waits for KV blocks until the preemption frees them.

Every figure is a constant, so the timeline strip, the step view and the latency panel drawn
from it are the same on every run; the SVG snapshot tests and ``scripts/screenshots.py`` use it.
"""

from __future__ import annotations

from typing import NamedTuple

from stepview.model.grow import Frozen
from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import KV_CACHE, TOKEN_BUDGET, StepBudget, WaitReason
from stepview.model.snapshot import (
    EngineCounters,
    EngineState,
    RecentStep,
    RequestState,
    RequestView,
    StepSnapshot,
)
from stepview.testing.snapshots import INFO, request

W, PF, DC, PE, FI = (
    RequestState.WAITING,
    RequestState.PREFILLING,
    RequestState.DECODING,
    RequestState.PREEMPTED,
    RequestState.FINISHED,
)
STEP_TIME = 0.008
MAX_TOKENS = 64
TOTAL_BLOCKS = 16
NEEDS_KV = WaitReason(KV_CACHE, "needs 3 more KV blocks, 1 free")
NO_BUDGET = WaitReason(TOKEN_BUDGET, "token budget spent (64 of 64)")

# (state, computed prompt tokens, output tokens, scheduled tokens, KV blocks, wait reason)
_Row = tuple[RequestState, int, int, int, int, WaitReason | None]
_S1: list[_Row | None] = [
    (W, 0, 0, 0, 0, None),
    (PF, 64, 0, 64, 4, None),
    (DC, 96, 1, 32, 7, None),
    (DC, 96, 2, 1, 7, None),
    (DC, 96, 3, 1, 7, None),
    (DC, 96, 4, 1, 7, None),
    (PE, 0, 4, 0, 0, NEEDS_KV),
    (PE, 0, 4, 0, 0, NEEDS_KV),
    (PF, 64, 4, 64, 4, None),
    (DC, 96, 5, 36, 7, None),
    (FI, 96, 6, 1, 0, None),
    (FI, 96, 6, 0, 0, None),
]
_S2: list[_Row | None] = [
    (W, 0, 0, 0, 0, NO_BUDGET),
    (W, 0, 0, 0, 0, NO_BUDGET),
    (DC, 20, 1, 20, 2, None),
    (DC, 20, 2, 1, 2, None),
    (DC, 20, 3, 1, 2, None),
    (DC, 20, 4, 1, 2, None),
    (DC, 20, 5, 1, 2, None),
    (FI, 20, 6, 1, 0, None),
]
_S3: list[_Row | None] = [
    None,
    None,
    (W, 0, 0, 0, 0, NEEDS_KV),
    (W, 0, 0, 0, 0, NEEDS_KV),
    (W, 0, 0, 0, 0, NEEDS_KV),
    (W, 0, 0, 0, 0, NEEDS_KV),
    (DC, 40, 1, 40, 3, None),
    (DC, 40, 2, 1, 3, None),
    (DC, 40, 3, 1, 3, None),
    (DC, 40, 4, 1, 3, None),
    (DC, 40, 5, 1, 3, None),
    (FI, 40, 6, 1, 0, None),
]
PROMPTS = {
    "s1": ("Summarise the scheduler's design in one page.", 96, 0.0),
    "s2": ("List three prime numbers:", 20, 0.0),
    "s3": ("Write a haiku about KV caches.", 40, 0.012),
}


def clock_of(step: int) -> float:
    """The driver clock after ``step`` (step 0: before the first step)."""
    return 0.002 + 0.01 * step


class _Life(NamedTuple):
    scheduled: float | None
    first_token: float | None
    finished: float | None
    preemptions: int


def _life(rows: list[_Row | None], step: int) -> _Life:
    """When the request was first scheduled, gave its first token, finished (up to ``step``)."""
    scheduled = first = done = None
    preemptions = 0
    for at, row in enumerate(rows[: step + 1]):
        if row is None:
            continue
        start = clock_of(at) - STEP_TIME
        if row[3] and scheduled is None:
            scheduled = start
        if row[2] and first is None:
            first = clock_of(at)
        if row[0] is FI and done is None:
            done = clock_of(at)
        if row[0] is PE and rows[at - 1] is not None and rows[at - 1][0] is not PE:  # type: ignore[index]
            preemptions += 1
    return _Life(scheduled, first, done, preemptions)


def _view(request_id: str, rows: list[_Row | None], step: int) -> RequestView | None:
    row = rows[step] if step < len(rows) else rows[-1]
    if row is None:
        return None
    state, computed, tokens, scheduled, blocks, wait = row
    prompt, prompt_tokens, arrival = PROMPTS[request_id]
    life = _life(rows, step)
    view = request(
        request_id,
        prompt,
        state,
        spec=SamplingSpec(max_tokens=6, seed=1),
        arrival=arrival,
        scheduled=life.scheduled,
        first_token=life.first_token,
        finished=life.finished,
        prompt_tokens=prompt_tokens,
        computed=computed,
        tokens=tokens,
        reason="length" if state is FI else None,
        preemptions=life.preemptions,
        wait=wait,
    )
    peak = max((r[4] for r in rows[: step + 1] if r is not None), default=0)
    return view._replace(
        scheduled_tokens=scheduled,
        kv_blocks=blocks,
        peak_kv_blocks=peak,
        cached_prompt_tokens=16 if request_id == "s3" and computed else 0,
    )


_LIVES = {"s1": _S1, "s2": _S2, "s3": _S3}


def preemption_story() -> list[StepSnapshot]:
    """The snapshots of steps 0 to 11, oldest first: what a source's ``history()`` holds."""
    out: list[StepSnapshot] = []
    finished: list[RequestView] = []
    recent: list[RecentStep] = []
    queries = hits = 0
    for step in range(len(_S1)):
        active: list[RequestView] = []
        views = {rid: _view(rid, rows, step) for rid, rows in _LIVES.items()}
        for view in views.values():
            if view is None:
                continue
            if not view.state.done:
                active.append(view)
            elif all(f.request_id != view.request_id for f in finished):
                finished.append(view)
        live = [v for v in views.values() if v is not None]
        # A request given more than one token computes prompt (or recomputes lost) tokens.
        prefill = sum(v.scheduled_tokens for v in live if v.scheduled_tokens > 1)
        decode = sum(v.scheduled_tokens for v in live if v.scheduled_tokens == 1)
        used = sum(v.kv_blocks for v in live)
        admitted = [v for v in live if v.scheduled_tokens > 1]
        queries += sum(v.prompt_tokens for v in admitted)
        hits += sum(v.cached_prompt_tokens for v in admitted)
        running = sum(v.state in (PF, DC) for v in active)
        waiting = sum(v.state in (W, PE) for v in active)
        kv = used / TOTAL_BLOCKS
        recent.append(RecentStep(step, clock_of(step), STEP_TIME, running, waiting, kv, decode))
        out.append(
            StepSnapshot(
                step=step,
                clock=clock_of(step),
                engine_state=EngineState.RUNNING if active else EngineState.IDLE,
                info=INFO,
                step_time=STEP_TIME if step else 0.0,
                counters=EngineCounters(
                    running=running,
                    waiting=waiting,
                    kv_cache_usage=kv,
                    prompt_tokens=prefill,
                    generation_tokens=decode,
                    prefix_cache_queries=queries,
                    prefix_cache_hits=hits,
                    preemptions=1 if step == 6 else 0,
                ),
                active=tuple(active),
                finished=Frozen(list(finished)),
                recent=tuple(recent[-60:]),
                budget=None
                if step == 0
                else StepBudget(MAX_TOKENS, prefill, decode, TOTAL_BLOCKS - used, TOTAL_BLOCKS),
            )
        )
    return out
