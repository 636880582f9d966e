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
import re
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
from stepview.model.engine_api import (
    Engine,
    EngineRejected,
    OutputUpdate,
    SchedulerEntry,
    StepResult,
)
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


@dataclass(frozen=True, slots=True)
class RunStats:
    """A run's totals: the driver's last log line, and what benchmarks compare with bare vLLM.

    ``busy_span`` is driver-clock seconds from the start of the first ``step()`` to the end of
    the last one, so throughput over it leaves out engine start-up and idle time (a TUI left
    open after the work is done) and compares equally with a bare ``step()`` loop.
    ``busy_cpu`` is the CPU time the driver thread used over that span: unlike the wall
    clock it does not grow when other processes take the CPU, but it also leaves out the time
    the thread waited for the GIL (which is how a UI thread slows the engine down).
    """

    steps: int
    requests_done: int
    tokens_generated: int
    stepping_time: float  # sum of step() wall times
    busy_span: float
    since_start: float
    busy_cpu: float = 0.0

    def summary(self) -> str:
        """The ``run summary: ...`` line the driver logs at shutdown (:meth:`parse` reads it)."""
        return (
            f"run summary: {self.steps} steps, {self.requests_done} requests done, "
            f"{self.tokens_generated} tokens generated, {self.stepping_time:.3f} s in step(), "
            f"{self.since_start:.3f} s since start, {self.busy_span:.6f} s first to last step "
            f"({self.busy_cpu:.6f} s CPU)"
        )

    @classmethod
    def parse(cls, text: str) -> RunStats | None:
        """The last ``run summary`` line in ``text`` (a log file), or ``None``."""
        found = _SUMMARY.findall(text)
        if not found:
            return None
        steps, done, tokens, stepping, since, busy, cpu = found[-1]
        return cls(
            int(steps),
            int(done),
            int(tokens),
            float(stepping),
            float(busy),
            float(since),
            float(cpu),
        )


_SUMMARY = re.compile(
    r"run summary: (\d+) steps, (\d+) requests done, (\d+) tokens generated, "
    r"([\d.]+) s in step\(\), ([\d.]+) s since start, ([\d.]+) s first to last step "
    r"\(([\d.]+) s CPU\)"
)


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
    text: Growing[str] = field(default_factory=Growing)
    text_len: int = 0
    last_piece: str = ""
    view: Completion | None = None

    def take_text(self, text: str) -> None:
        """Keep vLLM's cumulative ``text`` as the piece this step appended.

        vLLM's text only grows (stop strings are held back until decided), so normally the new
        text is the old one plus a suffix; that is checked on the last piece only, O(piece).
        Anything else starts the pieces afresh.
        """
        have = self.text_len
        if len(text) == have and (not have or text.endswith(self.last_piece)):
            return
        last = self.last_piece
        if len(text) > have and text[have - len(last) : have] == last:
            piece = text[have:]
        else:
            self.text = Growing()
            piece = text
        self.text.append(piece)
        self.text_len = len(text)
        self.last_piece = piece


@dataclass(slots=True)
class _Track:
    """Mutable, driver-only state of one request; ``view`` is its latest frozen picture.

    A step first folds every output and the scheduler's entry into the fields below, then
    freezes the request into one new ``view`` (an ``n=2`` request that moved on both samples
    and changed state is still frozen once).
    """

    view: RequestView
    completions: dict[int, _CompletionTrack] = field(default_factory=dict)
    in_engine: bool = False
    entry: SchedulerEntry | None = None  # the last scheduler entry seen (reused while unchanged)
    # Set while folding one step's result, cleared when the view is rebuilt:
    moved: bool = False  # an output arrived
    got_tokens: bool = False  # ... with new tokens
    new_entry: SchedulerEntry | None = None  # the scheduler's view changed
    prompt_token_ids: tuple[int, ...] | None = None  # first seen this step
    prompt_logprobs: tuple[PositionLogprobs | None, ...] | None = None  # first seen this step


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
        self._first_step_at: float | None = None  # clock() when the first step() began
        self._last_step_end = 0.0  # clock() when the latest step() returned
        self._first_step_cpu = 0.0  # thread_time() then, and ...
        self._last_step_cpu = 0.0  # ... when the latest step() returned
        self._counters = EngineCounters()
        self._total_generated = 0
        self._paused = start_paused
        self._single_steps = 0
        self._stopping = False
        self._stop_deadline: float | None = None  # time.monotonic() by which stop() gives up
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
        """Ask the thread to stop and wait for it, at most ``timeout`` s after the *first* ask.

        Several parties stop the driver on the way out (the app's quit, its unmount, the
        command after the app); sharing one deadline keeps a stuck engine from making them
        wait one after the other.
        """
        now = time.monotonic()
        if self._stop_deadline is None:
            self._stop_deadline = now + timeout
        self._commands.put(Shutdown())
        if self._thread.is_alive():
            self._thread.join(max(0.0, min(now + timeout, self._stop_deadline) - now))

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the driver thread to end (after a shutdown, or in headless runs)."""
        self._thread.join(timeout)

    @property
    def run_stats(self) -> RunStats:
        """Totals so far; exact once the driver thread has ended (read it after :meth:`join`)."""
        first = self._first_step_at
        return RunStats(
            steps=self._step,
            requests_done=len(self._finished),
            tokens_generated=self._total_generated,
            stepping_time=self._stepping_time,
            busy_span=0.0 if first is None else self._last_step_end - first,
            since_start=self._now(),
            busy_cpu=self._last_step_cpu - self._first_step_cpu,
        )

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
            self._end_in_flight(self._failed)
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
            log.info("%s", self.run_stats.summary())

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
                if self._first_step_at is None:
                    self._first_step_at = start
                    self._first_step_cpu = self._last_step_cpu = time.thread_time()
                result = engine.step()
                end = self._last_step_end = self._clock()
                self._last_step_cpu = time.thread_time()
                self._step_time = end - start
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

    def _end_in_flight(self, why: str) -> None:
        """The engine is gone: every request it held, or was to get, ends as aborted.

        They can never finish now; ending them puts them in the Finished pane and the
        results file with the reason, instead of leaving them running forever on screen.
        """
        for track in self._tracks.values():
            self._finish(track.view, RequestState.ABORTED, why)
        self._tracks.clear()
        self._pending.clear()

    def _abort(self, request_id: str) -> None:
        track = self._tracks.get(request_id)
        if track is None:
            return  # finished, rejected or unknown: nothing to do
        if track.in_engine and self._engine is not None:
            self._engine.abort([request_id])
            if not self._engine.has_unfinished():
                # The engine is empty and no step will run to report it: the last step's
                # figures would go on counting the aborted request as running.
                self._counters = replace(self._counters, running=0, waiting=0, kv_cache_usage=0.0)
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
                track.view = view._replace(state=RequestState.WAITING)
                continue
            del self._tracks[request_id]
            self._finish(view, RequestState.REJECTED, message)
        return count > 0

    # -- applying a step ---------------------------------------------------------------------

    def _apply(self, result: StepResult) -> None:
        """Fold a step's outputs and scheduler view into the tracks; one new view per change.

        Work is proportional to what the step changed: outputs (one per sample that moved)
        and scheduler entries that are new objects (the probe reuses unchanged ones, so an
        identity test skips every request that is just waiting or decoding along).
        """
        now = self._now()
        tracks = self._tracks
        touched: dict[str, _Track] = {}
        finished_ids: list[str] = []
        for update in result.outputs:
            track = tracks.get(update.request_id)
            if track is None:
                continue  # aborted this step
            if _fold_output(track, update):
                finished_ids.append(update.request_id)
            touched[update.request_id] = track
        scheduled = result.scheduled
        if scheduled is not None:
            for request_id, entry in scheduled.items():
                track = tracks.get(request_id)
                if track is None or entry is track.entry or not track.in_engine:
                    continue
                track.entry = entry
                view = track.view
                if (
                    entry.state is view.state
                    and entry.computed_prompt_tokens == view.computed_prompt_tokens
                    and entry.num_preemptions == view.num_preemptions
                ):
                    continue
                track.new_entry = entry
                touched[request_id] = track
        for track in touched.values():
            track.view = _freeze(track, now, scheduled is not None)
        for request_id in finished_ids:
            track = tracks.pop(request_id)
            view = track.view
            timings = view.timings
            if timings.scheduled is None:
                # Scheduled and finished within this one step (e.g. max_tokens=1): it has
                # already left the scheduler, so no entry ever showed it running.
                timings = timings._replace(scheduled=now)
            state_view = view._replace(
                timings=timings._replace(finished=now),
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

    def _finish(self, view: RequestView, state: RequestState, error: str | None) -> None:
        timings = view.timings
        if timings.finished is None:
            timings = timings._replace(finished=self._now())
        final = view._replace(state=state, error=error, timings=timings)
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


def _fold_output(track: _Track, update: OutputUpdate) -> bool:
    """Copy what is new in one output into the track; True when the request is finished.

    Token ids and logprobs are vLLM's live, growing lists: only the positions past what the
    track already holds are copied (O(new tokens) per step, not O(length)).
    """
    track.moved = True
    if update.prompt_token_ids and not track.view.prompt_token_ids:
        track.prompt_token_ids = tuple(update.prompt_token_ids)
    if update.prompt_logprobs is not None and track.view.prompt_logprobs is None:
        track.prompt_logprobs = tuple(update.prompt_logprobs)
    completions = track.completions
    for update_c in update.completions:
        ct = completions.get(update_c.index)
        if ct is None:
            ct = completions[update_c.index] = _CompletionTrack(update_c.index)
        tokens = ct.tokens
        have = len(tokens)
        if len(update_c.token_ids) > have:
            tokens.extend(update_c.token_ids[have:])
            track.got_tokens = True
        logprobs = ct.logprobs
        new_logprobs = update_c.logprobs
        if new_logprobs is not None:
            if logprobs is None:
                logprobs = ct.logprobs = Growing()
            have = len(logprobs)
            if len(new_logprobs) > have:
                logprobs.extend(new_logprobs[have:])
        ct.take_text(update_c.text)
        # Positional (here and in _freeze): with keywords the call costs twice as much, and
        # this runs for every sample of every running request, every step.
        ct.view = Completion(
            update_c.index,
            ct.text.view(),
            tokens.view(),
            update_c.cumulative_logprob,
            logprobs.view() if logprobs is not None else None,
            update_c.finish_reason,
            update_c.stop_reason,
        )
    return update.finished


def _freeze(track: _Track, now: float, scheduler_known: bool) -> RequestView:
    """The track's new frozen view after a step, and the per-step marks cleared.

    State comes from the scheduler's entry when the engine has one; without a scheduler
    view, a request that produced output is decoding.
    """
    view = track.view
    timings = view.timings
    state = view.state
    prompt_token_ids = view.prompt_token_ids
    prompt_tokens = view.prompt_tokens
    computed = view.computed_prompt_tokens
    preemptions = view.num_preemptions
    completions = view.completions
    if track.moved:
        if track.prompt_token_ids is not None:
            prompt_token_ids = track.prompt_token_ids
            prompt_tokens = len(prompt_token_ids)
        if track.got_tokens and timings.first_token is None:
            timings = Timings(timings.arrival, timings.scheduled, now, timings.finished)
        samples = track.completions
        if len(samples) == 1:  # n=1, the common case: no sort
            only = next(iter(samples.values())).view
            completions = () if only is None else (only,)
        else:
            completions = tuple(
                [ct.view for _, ct in sorted(samples.items()) if ct.view is not None]
            )
    entry = track.new_entry
    if entry is not None:
        state = entry.state
        if timings.scheduled is None and state.pane == "running":
            timings = Timings(timings.arrival, now, timings.first_token, timings.finished)
        prompt_tokens = entry.prompt_tokens
        computed = entry.computed_prompt_tokens
        preemptions = entry.num_preemptions
    elif track.moved and not scheduler_known and state is not RequestState.DECODING:
        state = RequestState.DECODING
        if timings.scheduled is None:
            timings = Timings(
                timings.arrival, timings.first_token, timings.first_token, timings.finished
            )
        computed = prompt_tokens
    prompt_logprobs = view.prompt_logprobs
    if track.prompt_logprobs is not None:
        prompt_logprobs = track.prompt_logprobs
    track.moved = track.got_tokens = False
    track.new_entry = None
    track.prompt_token_ids = track.prompt_logprobs = None
    return RequestView(
        view.request_id,
        view.prompt,
        view.spec,
        state,
        timings,
        prompt_tokens,
        computed,
        preemptions,
        prompt_token_ids,
        prompt_logprobs,
        completions,
        view.error,
    )


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {text}" if text else name
