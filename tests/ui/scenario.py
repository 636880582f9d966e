"""Hand-made snapshots and a static source: fixed pictures for pilot and SVG snapshot tests.

Every number here is a constant, so the screens they produce are the same on every run and
machine. ``scripts/screenshots.py`` uses the same scenarios for the README's pictures.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from stepview.engine.replay import ReplaySource
from stepview.model.commands import Command
from stepview.model.grow import Frozen
from stepview.model.prompts import SEED_PROMPTS
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import (
    Completion,
    EngineCounters,
    EngineInfo,
    EngineState,
    LogprobEntry,
    RequestState,
    RequestView,
    StepSnapshot,
    StepStat,
    Timings,
)
from stepview.model.trace import load_trace
from stepview.ui.app import StepviewApp
from tests.ui.replay_trace import TRACE

INFO = EngineInfo(
    model="stepview-tiny-qwen3",
    demo_model=True,
    vllm_version="0.32.0",
    max_model_len=512,
    max_num_seqs=8,
    max_logprobs=20,
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


class StaticSource:
    """A :class:`SnapshotSource` whose ``latest()`` is whatever the test set; records commands."""

    def __init__(self, snapshot: StepSnapshot, *, accepts_requests: bool = True) -> None:
        self.snapshot = snapshot
        self.accepts_requests = accepts_requests
        self.sent: list[Command] = []
        self.started = False
        self.stopped = False

    def start(self) -> None:
        self.started = True

    def latest(self) -> StepSnapshot:
        return self.snapshot

    def history(self) -> Sequence[StepSnapshot]:
        return (self.snapshot,)

    def send(self, command: Command) -> None:
        self.sent.append(command)

    def stop(self, timeout: float = 5.0) -> None:
        self.stopped = True

    @property
    def alive(self) -> bool:
        return self.started and not self.stopped


class HistorySource(StaticSource):
    """A live source that has published ``snapshots``: the last is ``latest()``, all are kept."""

    def __init__(self, snapshots: Sequence[StepSnapshot]) -> None:
        super().__init__(snapshots[-1])
        self.snapshots = list(snapshots)

    def publish(self, snapshot: StepSnapshot) -> None:
        self.snapshots.append(snapshot)
        self.snapshot = snapshot

    def history(self) -> Sequence[StepSnapshot]:
        return tuple(self.snapshots)


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
    )


def recent(steps: int = 60, last: int = 240) -> tuple[StepStat, ...]:
    """A strip of steps with a ramp in batch size and KV use, ending at step ``last``."""
    out = []
    for i in range(steps):
        running = min(8, 1 + i // 5)
        out.append(
            StepStat(
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


# -- the key presses that lead to each pictured view ------------------------------------------


def steady_cursors(app: App[None]) -> None:
    """Blinking cursors would make a picture depend on timing."""
    for widget in app.screen.query("Input, TextArea"):
        if isinstance(widget, Input | TextArea):
            widget.cursor_blink = False


async def show_detail(pilot: Pilot[None]) -> None:
    """The Running pane has focus; its second row is u1 (greedy, logprobs)."""
    await pilot.press("down", "enter")
    await pilot.pause()


async def show_form_error(pilot: Pilot[None]) -> None:
    """The add-prompt form after submitting with top_p = 1.5."""
    await pilot.press("a", *"Hi")
    top_p = pilot.app.screen.query_one("#field-top_p", Input)
    top_p.focus()
    top_p.value = "1.5"
    await pilot.press("ctrl+s")
    steady_cursors(pilot.app)
    await pilot.pause()


async def show_help(pilot: Pilot[None]) -> None:
    await pilot.press("question_mark")
    await pilot.pause()


def make_app(snapshot: StepSnapshot, **source_kwargs: bool) -> tuple[StepviewApp, StaticSource]:
    """An app over a static source, set up for repeatable screenshots."""
    source = StaticSource(snapshot, **source_kwargs)
    app = StepviewApp(source, clock=None)
    app.animation_level = "none"
    return app, source


def recorded_run() -> list[StepSnapshot]:
    """Every snapshot of the committed trace (``tests/data/replay.trace.jsonl``)."""
    return list(load_trace(TRACE).snapshots)


def history_app() -> tuple[StepviewApp, HistorySource]:
    """A live-looking app whose source has kept every snapshot of the recorded run."""
    source = HistorySource(recorded_run())
    app = StepviewApp(source, clock=None)
    app.animation_level = "none"
    return app, source


def replay_app(trace: str = str(TRACE)) -> tuple[StepviewApp, ReplaySource]:
    """The app over a paused replay of ``trace``: nothing moves until a key says so."""
    source = ReplaySource(trace, start_paused=True)
    app = StepviewApp(source, clock=None)
    app.animation_level = "none"
    return app, source


async def until(pilot: Pilot[None], condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Let the app run until ``condition`` holds (a source thread moves on its own)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)


Scene = Callable[[Pilot[None]], Awaitable[None]]


def at_step(step: int, *then: str) -> Scene:
    """Key presses for a picture at ``step`` (``:``, the number, enter), then keys ``then``."""

    async def go(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, StepviewApp)
        await until(pilot, lambda: app.check_action("goto", ()) is True)  # a step to go to
        await pilot.press("colon", *str(step), "enter")
        await until(pilot, lambda: app.shown is not None and app.shown.step == step)
        await pilot.press(*then)
        await pilot.pause()

    return go


async def at_end(pilot: Pilot[None]) -> None:
    """``>``: the last snapshot of a replay (the engine stopped, every request finished)."""
    app = pilot.app
    assert isinstance(app, StepviewApp)
    await until(pilot, lambda: app.check_action("newest", ()) is True)
    await pilot.press("greater_than_sign")
    await until(pilot, lambda: app.shown is not None and app.shown.engine_state.value == "stopped")
    await pilot.pause()
