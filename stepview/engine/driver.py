"""The engine driver: one thread owns the engine and turns every ``step()`` into a snapshot.

This is vLLM's ``llm_engine_example.py`` loop (add_request, step, look at the outputs, repeat)
run on a worker thread, with three additions:

* commands (add, abort, pause, resume, single step, shut down) arrive through a queue, so no
  other thread ever calls the engine (nothing in vLLM's engine is locked);
* after every step the driver publishes an immutable :class:`StepSnapshot` by swapping one
  reference; readers take the latest and never slow the loop down;
* snapshots share everything that did not change: a request that made no progress keeps the
  same :class:`RequestView` object, token lists grow in place behind frozen views. Building a
  snapshot costs what the step changed, not what the run has accumulated.

The driver imports no vLLM: it talks to the :class:`~stepview.model.engine_api.Engine`
protocol, so the same code runs the real engine and the deterministic fake used in UI tests.

How a request's state is derived, each step:

* ``PENDING`` from the moment its ``AddRequest`` is dequeued until it is handed to the engine
  (one per step with ``admit_per_step=1``, as the vLLM example does; all at once by default);
* ``WAITING`` / ``PREEMPTED`` / ``PREFILLING`` / ``DECODING`` from the scheduler's view when the
  engine provides one; otherwise ``DECODING`` once it produced a token, else ``WAITING``;
* ``FINISHED`` from the engine's ``finished`` output (for n > 1, when all samples are done),
  ``ABORTED`` on an abort command, ``REJECTED`` when the engine refused it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from stepview.model.commands import (
    Abort,
    AddRequest,
    Command,
    Pause,
    Resume,
    Shutdown,
    SingleStep,
)
from stepview.model.engine_api import Engine, EngineRejected, OutputUpdate, StepResult
from stepview.model.grow import Growing
from stepview.model.snapshot import (
    Completion,
    EngineCounters,
    EngineInfo,
    EngineState,
    PositionLogprobs,
    RequestState,
    RequestView,
    StepSnapshot,
    StepStat,
    Timings,
)

log = logging.getLogger(__name__)

PhaseCallback = Callable[[str], None]
EngineFactory = Callable[[PhaseCallback], Engine]

# How long the loop blocks on the command queue when there is nothing to step.
IDLE_WAIT_S = 0.05
# Steps kept for the sparklines.
RECENT_STEPS = 120


class SnapshotSink(Protocol):
    """Something that sees every snapshot on the driver thread (recorder, results file, printer).

    It must be cheap: it runs between two engine steps.
    """

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        """``finished`` holds the requests that reached a final state since the last call."""

    def close(self) -> None:
        """The driver is stopping; flush and release files."""


@dataclass(slots=True)
class _CompletionTrack:
    """Mutable, driver-only state of one sample; frozen into a :class:`Completion` per step."""

    index: int
    tokens: Growing[int] = field(default_factory=Growing)
    logprobs: Growing[PositionLogprobs] | None = None
    view: Completion | None = None


@dataclass(slots=True)
class _Track:
    """Mutable, driver-only state of one request; ``view`` is its latest frozen picture."""

    view: RequestView
    completions: dict[int, _CompletionTrack] = field(default_factory=dict)
    in_engine: bool = False


class Driver:
    """Runs an engine on its own thread and publishes a :class:`StepSnapshot` after each step.

    Implements :class:`~stepview.model.source.SnapshotSource`.
    """

    accepts_requests = True

    def __init__(
        self,
        engine_factory: EngineFactory,
        *,
        clock: Callable[[], float] = time.perf_counter,
        history_size: int = 256,
        admit_per_step: int = 0,
        sinks: Sequence[SnapshotSink] = (),
        start_paused: bool = False,
    ) -> None:
        self._factory = engine_factory
        self._clock = clock
        self._t0 = clock()
        self._admit_per_step = admit_per_step
        self._sinks = list(sinks)
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="stepview-driver", daemon=True)
        self._history: deque[StepSnapshot] = deque(maxlen=max(1, history_size))
        self._history_lock = threading.Lock()
        # Driver-thread state.
        self._engine: Engine | None = None
        self._info = EngineInfo()
        self._tracks: dict[str, _Track] = {}
        self._pending: deque[str] = deque()
        self._finished: Growing[RequestView] = Growing()
        self._finished_since_publish: list[RequestView] = []
        self._seen_ids: set[str] = set()
        self._recent: deque[StepStat] = deque(maxlen=RECENT_STEPS)
        self._step = 0
        self._step_time = 0.0
        self._stepping_time = 0.0  # sum of step() wall times: the engine's share of the run
        self._counters = EngineCounters()
        self._total_generated = 0
        self._paused = start_paused
        self._single_steps = 0
        self._stopping = False
        self._failed: str | None = None
        self.startup_exception: BaseException | None = None
        """What the engine factory raised, if it failed (e.g. a usage error in vLLM's flags)."""
        self._phase = "starting"
        self._phase_since = 0.0
        self._latest = StepSnapshot(step=0, clock=0.0, engine_state=EngineState.STARTING)

    # -- SnapshotSource ----------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def latest(self) -> StepSnapshot:
        return self._latest

    def history(self) -> Sequence[StepSnapshot]:
        with self._history_lock:
            return tuple(self._history)

    def send(self, command: Command) -> None:
        self._commands.put(command)

    def stop(self, timeout: float = 5.0) -> None:
        self._commands.put(Shutdown())
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the driver thread to end (after a shutdown, or in headless runs)."""
        self._thread.join(timeout)

    @property
    def error(self) -> str | None:
        """Why the engine failed (start-up or a step), if it did."""
        return self._failed

    # -- the loop ----------------------------------------------------------------------------

    def _now(self) -> float:
        return self._clock() - self._t0

    def _run(self) -> None:
        try:
            self._set_phase("starting engine")
            self._engine = self._factory(self._set_phase)
            self._info = self._engine.info
        except BaseException as exc:  # start-up can fail any way at all; show it, don't die
            log.error("engine start-up failed\n%s", traceback.format_exc())
            self.startup_exception = exc
            self._failed = f"engine start-up failed: {_describe(exc)}"
            self._publish(EngineState.ERROR)
            self._wait_for_shutdown()
            self._close_sinks()
            return
        try:
            self._publish(self._idle_state())
            self._loop(self._engine)
        except Exception as exc:
            log.error("engine step failed\n%s", traceback.format_exc())
            self._failed = f"engine failed: {_describe(exc)}"
            self._publish(EngineState.ERROR)
            self._wait_for_shutdown()
        finally:
            try:
                self._engine.shutdown()
            except Exception:
                log.exception("engine shutdown failed")
            if self._failed is None:
                self._publish(EngineState.STOPPED)
            self._close_sinks()
            log.info(
                "run summary: %d steps, %d requests done, %d tokens generated, "
                "%.3f s in step(), %.3f s since start",
                self._step,
                len(self._finished),
                self._total_generated,
                self._stepping_time,
                self._now(),
            )

    def _loop(self, engine: Engine) -> None:
        while True:
            busy = bool(self._pending) or engine.has_unfinished()
            runnable = busy and (not self._paused or self._single_steps > 0)
            dirty = self._drain_commands(block=not runnable)
            if self._stopping:
                return
            if self._paused and self._single_steps == 0:
                if dirty:
                    self._publish(EngineState.PAUSED)
                continue
            admitted = self._admit(engine)
            if engine.has_unfinished():
                if self._single_steps:
                    self._single_steps -= 1
                start = self._clock()
                result = engine.step()
                self._step_time = self._clock() - start
                self._stepping_time += self._step_time
                self._step += 1
                self._apply(result)
                self._publish(self._idle_state())
            elif dirty or admitted:
                self._single_steps = 0
                self._publish(self._idle_state())

    def _idle_state(self) -> EngineState:
        if self._paused:
            return EngineState.PAUSED
        engine = self._engine
        busy = bool(self._pending) or (engine is not None and engine.has_unfinished())
        return EngineState.RUNNING if busy else EngineState.IDLE

    def _wait_for_shutdown(self) -> None:
        """After a failure: keep answering commands (adds are rejected) until told to stop."""
        while not self._stopping:
            if self._drain_commands(block=True):
                self._publish(EngineState.ERROR)

    # -- commands ----------------------------------------------------------------------------

    def _drain_commands(self, block: bool) -> bool:
        """Handle every queued command; when ``block``, wait a little for the first one."""
        handled = False
        try:
            if block:
                self._handle(self._commands.get(timeout=IDLE_WAIT_S))
                handled = True
            while True:
                self._handle(self._commands.get_nowait())
                handled = True
        except queue.Empty:
            return handled

    def _handle(self, command: Command) -> None:
        match command:
            case AddRequest():
                self._accept(command)
            case Abort(request_id=request_id):
                self._abort(request_id)
            case Pause():
                self._paused = True
            case Resume():
                self._paused = False
                self._single_steps = 0
            case SingleStep():
                if self._paused:
                    self._single_steps += 1
            case Shutdown():
                self._stopping = True

    def _accept(self, command: AddRequest) -> None:
        now = self._now()
        view = RequestView(
            request_id=command.request_id,
            prompt=command.prompt,
            spec=command.spec,
            state=RequestState.PENDING,
            timings=Timings(arrival=now),
        )
        if command.request_id in self._seen_ids:
            message = f"duplicate request id {command.request_id!r}"
            self._finish(view, RequestState.REJECTED, message)
            return
        self._seen_ids.add(command.request_id)
        if self._failed is not None or self._engine is None:
            self._finish(view, RequestState.REJECTED, self._failed or "engine is not running")
            return
        self._tracks[command.request_id] = _Track(view)
        self._pending.append(command.request_id)

    def _abort(self, request_id: str) -> None:
        track = self._tracks.get(request_id)
        if track is None:
            return  # finished, rejected or unknown: nothing to do
        if track.in_engine and self._engine is not None:
            self._engine.abort([request_id])
        else:
            self._pending.remove(request_id)
        del self._tracks[request_id]
        self._finish(track.view, RequestState.ABORTED, "aborted by the user")

    def _admit(self, engine: Engine) -> bool:
        """Hand pending requests to the engine (all, or ``admit_per_step`` per step)."""
        count = len(self._pending)
        if self._admit_per_step:
            count = min(count, self._admit_per_step)
        for _ in range(count):
            request_id = self._pending.popleft()
            track = self._tracks[request_id]
            view = track.view
            try:
                engine.add_request(request_id, view.prompt, view.spec)
            except EngineRejected as exc:
                message = str(exc)
            except Exception as exc:  # a faulty engine must not take the others down
                log.warning("add_request(%s) raised\n%s", request_id, traceback.format_exc())
                message = _describe(exc)
            else:
                track.in_engine = True
                track.view = replace(view, state=RequestState.WAITING)
                continue
            del self._tracks[request_id]
            self._finish(view, RequestState.REJECTED, message)
        return count > 0

    # -- applying a step ---------------------------------------------------------------------

    def _apply(self, result: StepResult) -> None:
        now = self._now()
        finished_ids: list[str] = []
        changed: dict[str, _Track] = {}
        for update in result.outputs:
            track = self._tracks.get(update.request_id)
            if track is None:
                continue  # aborted this step
            if self._apply_output(track, update, now):
                finished_ids.append(update.request_id)
            changed[update.request_id] = track
        scheduled = result.scheduled
        for request_id, track in self._tracks.items():
            if not track.in_engine:
                continue
            view = track.view
            if scheduled is not None:
                entry = scheduled.get(request_id)
                if entry is None:
                    continue
                if (
                    entry.state is view.state
                    and entry.computed_prompt_tokens == view.computed_prompt_tokens
                    and entry.num_preemptions == view.num_preemptions
                ):
                    continue
                state = entry.state
                timings = view.timings
                if timings.scheduled is None and state.pane == "running":
                    timings = replace(timings, scheduled=now)
                track.view = replace(
                    view,
                    state=state,
                    timings=timings,
                    prompt_tokens=entry.prompt_tokens,
                    computed_prompt_tokens=entry.computed_prompt_tokens,
                    num_preemptions=entry.num_preemptions,
                )
            elif request_id in changed and view.state is not RequestState.DECODING:
                timings = view.timings
                if timings.scheduled is None:
                    timings = replace(timings, scheduled=timings.first_token)
                track.view = replace(
                    view,
                    state=RequestState.DECODING,
                    timings=timings,
                    computed_prompt_tokens=view.prompt_tokens,
                )
        for request_id in finished_ids:
            track = self._tracks.pop(request_id)
            view = track.view
            state_view = replace(
                view,
                timings=replace(view.timings, finished=now),
                computed_prompt_tokens=max(view.computed_prompt_tokens, view.prompt_tokens),
            )
            self._finish(state_view, RequestState.FINISHED, None)
        counters = result.counters
        self._counters = counters
        self._total_generated += counters.generation_tokens
        self._recent.append(
            StepStat(
                step=self._step,
                clock=now,
                step_time=self._step_time,
                running=counters.running,
                waiting=counters.waiting,
                kv_cache_usage=counters.kv_cache_usage,
                generation_tokens=counters.generation_tokens,
            )
        )

    def _apply_output(self, track: _Track, update: OutputUpdate, now: float) -> bool:
        """Fold one output into the track; returns True when the request is finished."""
        view = track.view
        prompt_token_ids = view.prompt_token_ids
        prompt_tokens = view.prompt_tokens
        if not prompt_token_ids and update.prompt_token_ids:
            prompt_token_ids = tuple(update.prompt_token_ids)
            prompt_tokens = len(prompt_token_ids)
        prompt_logprobs = view.prompt_logprobs
        if prompt_logprobs is None and update.prompt_logprobs is not None:
            prompt_logprobs = tuple(update.prompt_logprobs)
        completions = track.completions
        got_tokens = False
        for update_c in update.completions:
            ct = completions.get(update_c.index)
            if ct is None:
                ct = completions[update_c.index] = _CompletionTrack(update_c.index)
            tokens = ct.tokens
            have = len(tokens)
            if len(update_c.token_ids) > have:
                tokens.extend(update_c.token_ids[have:])
                got_tokens = True
            logprobs = ct.logprobs
            if update_c.logprobs is not None:
                if logprobs is None:
                    logprobs = ct.logprobs = Growing()
                if len(update_c.logprobs) > len(logprobs):
                    logprobs.extend(update_c.logprobs[len(logprobs) :])
            ct.view = Completion(
                index=update_c.index,
                text=update_c.text,
                token_ids=tokens.view(),
                cumulative_logprob=update_c.cumulative_logprob,
                logprobs=logprobs.view() if logprobs is not None else None,
                finish_reason=update_c.finish_reason,
                stop_reason=update_c.stop_reason,
            )
        timings = view.timings
        if got_tokens and timings.first_token is None:
            timings = replace(timings, first_token=now)
        track.view = RequestView(
            request_id=view.request_id,
            prompt=view.prompt,
            spec=view.spec,
            state=view.state,
            timings=timings,
            prompt_tokens=prompt_tokens,
            computed_prompt_tokens=view.computed_prompt_tokens,
            num_preemptions=view.num_preemptions,
            prompt_token_ids=prompt_token_ids,
            prompt_logprobs=prompt_logprobs,
            completions=tuple(
                ct.view for _, ct in sorted(completions.items()) if ct.view is not None
            ),
            error=view.error,
        )
        return update.finished

    def _finish(self, view: RequestView, state: RequestState, error: str | None) -> None:
        timings = view.timings
        if timings.finished is None:
            timings = replace(timings, finished=self._now())
        final = replace(view, state=state, error=error, timings=timings)
        self._finished.append(final)
        self._finished_since_publish.append(final)

    # -- publishing --------------------------------------------------------------------------

    def _set_phase(self, phase: str) -> None:
        self._phase = phase
        self._phase_since = self._now()
        self._publish(EngineState.STARTING)

    def _publish(self, state: EngineState) -> None:
        phase = self._failed if state is EngineState.ERROR else self._phase
        snapshot = StepSnapshot(
            step=self._step,
            clock=self._now(),
            engine_state=state,
            info=self._info,
            phase=phase or "",
            phase_since=self._phase_since,
            step_time=self._step_time,
            counters=self._counters,
            active=tuple(track.view for track in self._tracks.values()),
            finished=self._finished.view(),
            recent=tuple(self._recent),
            total_generated=self._total_generated,
        )
        self._latest = snapshot
        with self._history_lock:
            self._history.append(snapshot)
        finished, self._finished_since_publish = self._finished_since_publish, []
        for sink in self._sinks:
            sink.on_snapshot(snapshot, finished)

    def _close_sinks(self) -> None:
        for sink in self._sinks:
            try:
                sink.close()
            except Exception:
                log.exception("closing %r failed", sink)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {text}" if text else name
