"""The scripted snapshot source ``ui_scale.py`` drives the app with: a production-size run.

Every snapshot is built before the app starts (so building costs the measured UI nothing),
and a thread publishes them at a fixed rate by swapping one reference, as the driver does.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache

from stepview.model.active import ActiveBuilder
from stepview.model.commands import Command
from stepview.model.grow import Frozen
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import (
    Completion,
    EngineCounters,
    EngineInfo,
    EngineState,
    RecentStep,
    RequestState,
    RequestView,
    StepSnapshot,
    Timings,
)

STEP_S = 0.01  # the scripted engine's clock advances this much per snapshot
HISTORY_SIZE = 2000  # the TUI's default --history
_TEXT = (
    "the engine steps tokens in a batch while requests wait their turn for the cache and every "
    "prompt is scheduled prefilled and decoded until it reaches its length"
)
_WORDS = _TEXT.split()
SPECS = (
    SamplingSpec(temperature=0.0, max_tokens=256, logprobs=1),
    SamplingSpec(temperature=0.8, top_k=5, max_tokens=256, seed=7),
    SamplingSpec(n=2, temperature=0.8, top_p=0.95, max_tokens=256, seed=9),
)


@dataclass(slots=True)
class _Running:
    """One running request of the script: its token lists grow in place, as the driver's do."""

    request_id: str
    prompt: str
    spec: SamplingSpec
    arrival: float
    tokens: list[list[int]] = field(default_factory=list)
    pieces: list[list[str]] = field(default_factory=list)  # text appended per step
    shown: RequestView | None = None  # its view in the latest snapshot, while it runs

    def grow(self, step: int) -> None:
        """One more token (and its text) for every sample."""
        for ids, text in zip(self.tokens, self.pieces, strict=True):
            ids.append(step)
            text.append(_WORDS[step % len(_WORDS)] + " ")

    def grown(self, steps: int) -> _Running:
        """This request with ``steps`` tokens per sample already made, in one pass: what
        ``steps`` calls of :meth:`grow` leave, a list of its own per sample, except that the
        pieces' strings are shared with every other request grown to the same length.

        For the million finished requests of the production size: their 43 million strings
        of their own, made one call of :meth:`grow` at a time, took 74 s and 2.6 GB (of 4.5)
        to build, and the memory pass, tracing each one, outlasted its timeout; the app never
        reads a finished request's text in the panes. The lists are still each request's own,
        so the garbage collector walks as many objects as in a run.
        """
        pieces = _pieces(steps)
        self.tokens = [list(range(steps)) for _ in range(self.spec.n)]
        self.pieces = [list(pieces) for _ in range(self.spec.n)]
        return self

    def view(self, now: float, state: RequestState = RequestState.DECODING) -> RequestView:
        completions = tuple(
            Completion(i, Frozen(text, len(text)), Frozen(ids, len(ids)))
            for i, (ids, text) in enumerate(zip(self.tokens, self.pieces, strict=True))
        )
        timings = Timings(self.arrival, self.arrival + 0.01, self.arrival + 0.02)
        if state is RequestState.FINISHED:
            timings = Timings(self.arrival, self.arrival + 0.01, self.arrival + 0.02, now)
            completions = tuple(c._replace(finish_reason="length") for c in completions)
        return RequestView(
            self.request_id,
            self.prompt,
            self.spec,
            state,
            timings,
            16,
            16,
            0,
            (),
            None,
            completions,
        )


@cache
def _pieces(steps: int) -> tuple[str, ...]:
    """The text :meth:`_Running.grow` appends in its first ``steps`` calls."""
    return tuple(_WORDS[step % len(_WORDS)] + " " for step in range(steps))


# The words of prompt ``i`` repeat with ``i`` modulo this (a multiple of both periods below).
_PROMPT_PERIOD = len(_WORDS) * 20
_PROMPT_WORDS = [
    [_WORDS[(i * 7 + k) % len(_WORDS)] for k in range(6 + i % 20)] for i in range(_PROMPT_PERIOD)
]


def prompt_text(i: int) -> str:
    """Request ``i``'s prompt: a string of its own, as every request's is."""
    return " ".join(_PROMPT_WORDS[i % _PROMPT_PERIOD])


def iter_snapshots(
    running: int, waiting: int, finished: int, count: int, churn: int = 2
) -> Iterator[StepSnapshot]:
    """``count`` consecutive snapshots: every running request gains a token per snapshot,
    ``churn`` of them finish and as many new ones start; the waiting ones stay queued.

    Shaped as the driver shapes them: one append-only list behind every ``finished`` view,
    the active ones in an :class:`~stepview.model.active.ActiveBuilder`'s chunks (in arrival
    order: the queue, then the running ones), a new :class:`RequestView` only for requests
    that changed. Made one at a time, when asked for: the memory pass weighs the first before
    the others share into it.
    """
    info = EngineInfo("ui-scale-script", vllm_version="script", max_num_seqs=running)
    done: list[RequestView] = []
    for i in range(finished):
        run = _Running(f"f{i}", prompt_text(i), SPECS[i % 3], 0.0).grown(32)
        done.append(run.view(1.0, RequestState.FINISHED))
    builder = ActiveBuilder()
    for i in range(waiting):
        builder.append(
            RequestView(f"w{i}", prompt_text(i), SPECS[i % 3], RequestState.WAITING, Timings(0.0))
        )
    active: deque[_Running] = deque()
    next_id = 0

    def start(now: float) -> None:
        nonlocal next_id
        run = _Running(f"r{next_id}", prompt_text(next_id), SPECS[next_id % 3], now).grown(0)
        run.shown = run.view(now)
        builder.append(run.shown)
        active.append(run)
        next_id += 1

    for _ in range(running):
        start(0.0)
    recent: deque[RecentStep] = deque(maxlen=120)
    for step in range(1, count + 1):
        now = 1.0 + step * STEP_S
        for _ in range(churn):
            run = active.popleft()
            assert run.shown is not None
            builder.remove(run.shown)
            done.append(run.view(now, RequestState.FINISHED))
            start(now)
        for run in active:
            assert run.shown is not None
            run.grow(step)
            view = run.view(now)
            builder.set(run.shown, view)
            run.shown = view
        counters = EngineCounters(running, waiting, 0.5, 0, running + churn)
        recent.append(RecentStep(step, now, STEP_S, running, waiting, 0.5, running + churn))
        yield StepSnapshot(
            step=step,
            clock=now,
            engine_state=EngineState.RUNNING,
            info=info,
            step_time=STEP_S,
            counters=counters,
            active=builder.freeze(),
            finished=Frozen(done, len(done)),
            recent=tuple(recent),
            total_generated=step * running,
        )


class ScriptedSource:
    """A :class:`~stepview.model.source.SnapshotSource` that publishes prepared snapshots.

    ``latest()`` notes when the app first picked each snapshot up; a thread publishes one
    snapshot every ``1 / rate`` seconds after ``warmup`` seconds, then asks the app to exit.
    """

    accepts_requests = True

    def __init__(self, snapshots: Sequence[StepSnapshot], rate: float, warmup: float) -> None:
        self.snapshots = snapshots
        self.rate = rate
        self.warmup = warmup
        self.index = {id(s): i for i, s in enumerate(snapshots)}
        self.published: list[float | None] = [None] * len(snapshots)
        self.picked: list[float | None] = [None] * len(snapshots)
        self._latest = snapshots[0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scripted-source", daemon=True)
        self.on_done: Callable[[], None] = lambda: None
        # (wall, process CPU) when publishing starts and ends: the measured window.
        self.cpu_marks: list[tuple[float, float]] = []

    def start(self) -> None:
        self.published[0] = time.perf_counter()
        self._thread.start()

    def _run(self) -> None:
        if self._stop.wait(self.warmup):
            return
        begin = time.perf_counter()
        self.cpu_marks.append((begin, time.process_time()))
        for i in range(1, len(self.snapshots)):
            delay = begin + i / self.rate - time.perf_counter()
            if delay > 0 and self._stop.wait(delay):
                return
            self.published[i] = time.perf_counter()
            self._latest = self.snapshots[i]
        if not self._stop.wait(0.5):  # let the last snapshot reach the screen
            self.cpu_marks.append((time.perf_counter(), time.process_time()))
            self.on_done()

    def latest(self) -> StepSnapshot:
        snapshot = self._latest
        i = self.index[id(snapshot)]
        if self.picked[i] is None:
            self.picked[i] = time.perf_counter()
        return snapshot

    def history(self) -> Sequence[StepSnapshot]:
        last = max(i for i, t in enumerate(self.published) if t is not None)
        return tuple(self.snapshots[max(0, last - HISTORY_SIZE + 1) : last + 1])

    def send(self, command: Command) -> None:
        pass

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()
