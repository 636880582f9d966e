"""Hand-made snapshots: a run caught mid-way with something in every state, and a few others.

Every number here is a constant, so the screens drawn from them are the same on every run and
machine. The SVG snapshot tests and ``scripts/screenshots.py`` (the README's pictures) draw the
same ones; the prompts include text that tries to break a row (escape sequences, emoji with
joiners, right-to-left overrides).
"""

from __future__ import annotations

from dataclasses import replace

from stepview.model.grow import Frozen
from stepview.model.prompts import SEED_PROMPTS
from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import BEHIND, KV_CACHE, WaitReason
from stepview.model.snapshot import (
    TINY_MODEL_NAME,
    Completion,
    EngineCounters,
    EngineInfo,
    EngineState,
    LogprobEntry,
    RecentStep,
    RequestState,
    RequestView,
    StepSnapshot,
    Timings,
)

INFO = EngineInfo(
    model=TINY_MODEL_NAME,
    demo_model=True,
    vllm_version="0.32.0",
    max_model_len=512,
    max_num_seqs=8,
    max_logprobs=20,
    chat_template=True,  # as the tiny model's tokenizer has
)

# Prompts that try to break a row: newlines, escape sequences, emoji with joiners,
# right-to-left text with a bidi override, zero-width characters.
TRICKY_PROMPT = "line one\nline two\x1b[31m red?\t\U0001f468\u200d\U0001f469\u200d\U0001f467 family"
# "Shalom olam" inside a right-to-left override, then Arabic "marhaba".
RTL_PROMPT = (
    "\u202e\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd\u202c and "
    "\u0645\u0631\u062d\u0628\u0627"
)

WORDS = (" the", " engine", " steps", " tokens", " in", " a", " batch", ".")


def text_of(n: int, start: int = 0) -> str:
    return "".join(WORDS[(start + i) % len(WORDS)] for i in range(n))


def completion(
    index: int, n_tokens: int, *, reason: str | None = None, logprobs: bool = False
) -> Completion:
    ids = list(range(100 + index, 100 + index + n_tokens))
    lps = None
    if logprobs:
        lps = Frozen(
            [
                (
                    LogprobEntry(t, -0.1 * (i + 1), 1, WORDS[(index + i) % len(WORDS)]),
                    LogprobEntry(t + 50, -1.5 - 0.1 * i, 2, WORDS[(index + i + 3) % len(WORDS)]),
                )
                for i, t in enumerate(ids)
            ]
        )
    return Completion.of_text(
        index,
        text_of(n_tokens, index),
        token_ids=Frozen(ids),
        cumulative_logprob=-0.5 * n_tokens if logprobs else None,
        logprobs=lps,
        finish_reason=reason,
    )


def request(
    request_id: str,
    prompt: str,
    state: RequestState,
    *,
    spec: SamplingSpec | None = None,
    arrival: float = 0.0,
    scheduled: float | None = None,
    first_token: float | None = None,
    finished: float | None = None,
    prompt_tokens: int = 0,
    computed: int = 0,
    tokens: int = 0,
    reason: str | None = None,
    preemptions: int = 0,
    error: str | None = None,
    wait: WaitReason | None = None,
) -> RequestView:
    """A request in any state, with ``tokens`` output tokens per sample."""
    spec = spec or SamplingSpec()
    samples = spec.n if tokens else 0
    logprobs = spec.logprobs is not None
    prompt_ids = tuple(range(1, prompt_tokens + 1))
    prompt_lps = None
    if spec.prompt_logprobs is not None and prompt_tokens:
        prompt_lps = (
            None,
            *(
                (LogprobEntry(t, -2.0 - t / 10, 3 + t % 4, WORDS[t % len(WORDS)]),)
                for t in prompt_ids[1:]
            ),
        )
    return RequestView(
        request_id=request_id,
        prompt=prompt,
        spec=spec,
        state=state,
        timings=Timings(arrival, scheduled, first_token, finished),
        prompt_tokens=prompt_tokens,
        computed_prompt_tokens=computed,
        num_preemptions=preemptions,
        prompt_token_ids=prompt_ids,
        prompt_logprobs=prompt_lps,
        completions=tuple(
            completion(i, tokens, reason=reason, logprobs=logprobs) for i in range(samples)
        ),
        error=error,
        wait_reason=wait,
    )


def recent(steps: int = 60, last: int = 240) -> tuple[RecentStep, ...]:
    """A strip of steps with a ramp in batch size and KV use, ending at step ``last``."""
    out = []
    for i in range(steps):
        running = min(8, 1 + i // 5)
        out.append(
            RecentStep(
                step=last - steps + 1 + i,
                clock=10.0 + 0.02 * i,
                step_time=0.004 + 0.0002 * running,
                running=running,
                waiting=max(0, 6 - i // 8),
                kv_cache_usage=min(0.9, 0.05 + 0.012 * i),
                generation_tokens=running + (i % 3),
            )
        )
    return tuple(out)


GREEDY, TOPK, N2 = (spec for _, spec in SEED_PROMPTS)


def mid_run(now: float = 11.2) -> StepSnapshot:
    """Three panes with something in every state, at step 240."""
    active = (
        request("u9", "Queued behind the batch", RequestState.PENDING, arrival=11.19),
        request(
            "u7",
            TRICKY_PROMPT,
            RequestState.WAITING,
            spec=TOPK,
            arrival=10.4,
            prompt_tokens=40,
            wait=WaitReason(BEHIND, "behind u4, which vLLM could not schedule", "u4"),
        ),
        request(
            "u4",
            RTL_PROMPT,
            RequestState.PREEMPTED,
            spec=N2,
            arrival=9.5,
            scheduled=9.6,
            prompt_tokens=30,
            preemptions=2,
            wait=WaitReason(KV_CACHE, "needs 3 more KV blocks, 1 free"),
        ),
        request(
            "u5",
            "Summarize the plot of Hamlet in one sentence: " + "x" * 300,
            RequestState.PREFILLING,
            spec=SamplingSpec(temperature=0.7, max_tokens=64, seed=7),
            arrival=10.1,
            scheduled=10.9,
            prompt_tokens=320,
            computed=128,
        ),
        request(
            "u1",
            SEED_PROMPTS[0][0],
            RequestState.DECODING,
            spec=GREEDY,
            arrival=8.0,
            scheduled=8.05,
            first_token=8.1,
            prompt_tokens=8,
            computed=8,
            tokens=12,
        ),
        request(
            "u3",
            SEED_PROMPTS[2][0],
            RequestState.DECODING,
            spec=N2,
            arrival=8.2,
            scheduled=8.3,
            first_token=8.35,
            prompt_tokens=7,
            computed=7,
            tokens=9,
        ),
    )
    finished = Frozen(
        [
            request(
                "u2",
                SEED_PROMPTS[1][0],
                RequestState.FINISHED,
                spec=TOPK,
                arrival=7.0,
                scheduled=7.05,
                first_token=7.1,
                finished=7.9,
                prompt_tokens=6,
                computed=6,
                tokens=16,
                reason="length",
            ),
            request(
                "u6",
                "Stop at the first period.",
                RequestState.FINISHED,
                spec=SamplingSpec(stop=(".",), max_tokens=32),
                arrival=7.5,
                scheduled=7.5,
                first_token=7.6,
                finished=8.4,
                prompt_tokens=6,
                computed=6,
                tokens=7,
                reason="stop",
            ),
            request(
                "u8",
                "Aborted while decoding",
                RequestState.ABORTED,
                arrival=9.0,
                scheduled=9.1,
                first_token=9.2,
                finished=9.6,
                prompt_tokens=4,
                computed=4,
                tokens=5,
                error="aborted by the user",
            ),
            request(
                "u10",
                "y" * 600,
                RequestState.REJECTED,
                arrival=10.0,
                finished=10.0,
                error=(
                    "The decoder prompt (length 600) is longer than the maximum model length "
                    "of 512."
                ),
            ),
        ]
    )
    return StepSnapshot(
        step=240,
        clock=now,
        engine_state=EngineState.RUNNING,
        info=INFO,
        step_time=0.0046,
        counters=EngineCounters(
            running=5,
            waiting=3,
            kv_cache_usage=0.62,
            prompt_tokens=64,
            generation_tokens=5,
            preemptions=0,
        ),
        active=active,
        finished=finished,
        recent=recent(),
        total_generated=1234,
    )


def loading() -> StepSnapshot:
    return StepSnapshot(
        step=0,
        clock=4.5,
        engine_state=EngineState.STARTING,
        info=EngineInfo(),
        phase="loading model weights",
        phase_since=1.25,
    )


def startup_error() -> StepSnapshot:
    return StepSnapshot(
        step=0,
        clock=3.0,
        engine_state=EngineState.ERROR,
        phase=(
            "engine start-up failed: OSError: /models/missing is not a local folder and is "
            "not a valid model identifier"
        ),
    )


def many_finished(count: int, base: StepSnapshot | None = None) -> StepSnapshot:
    """``base`` with ``count`` finished requests (for the 10 000-row Finished pane)."""
    base = base or mid_run()
    done = [
        request(
            f"f{i}",
            f"prompt number {i} " + text_of(6, i),
            RequestState.FINISHED if i % 10 else RequestState.ABORTED,
            arrival=i * 0.001,
            scheduled=i * 0.001 + 0.01,
            first_token=i * 0.001 + 0.02,
            finished=i * 0.001 + 0.3,
            prompt_tokens=8,
            computed=8,
            tokens=16,
            reason="length" if i % 10 else None,
        )
        for i in range(count)
    ]
    return replace(base, finished=Frozen(done))
