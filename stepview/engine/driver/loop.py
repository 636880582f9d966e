"""The engine driver: one thread owns the engine and turns every ``step()`` into a snapshot.

This is vLLM's ``llm_engine_example.py`` loop (add_request, step, look at the outputs, repeat)
run on a worker thread, with three additions:

* commands (add, abort, pause, resume, single step, shut down) arrive through a queue, so no
  other thread ever calls the engine (nothing in vLLM's engine is locked);
* after every step the driver publishes an immutable :class:`StepSnapshot` by swapping one
  reference; readers take the latest and never slow the loop down;
* snapshots share everything that did not change (see :mod:`stepview.engine.driver.ledger`, which
  keeps every request's state and folds each step's outputs into it). Building a snapshot
  costs what the step changed, not what the run has accumulated.

The driver imports no vLLM: it talks to the :class:`~stepview.model.engine_api.Engine`
protocol (the real engine, or the fake of the UI tests). It also watches engines it does not
drive (a :class:`WatchedEngine`: ``stepview --attach``): the loop then reports each step the
server made, pausing only holds the view, the engine state follows what it says of its link;
a large fleet's pool runs that loop a turn at a time (:meth:`Driver.advance`), no thread each.
The driver keeps the thread, the loop, the stop deadline and the step figures; each request is
the :class:`RequestLedger`'s, the way in the :class:`~stepview.engine.driver.inbox.Inbox`'s,
the way out the :class:`~stepview.engine.driver.publishing.Publisher`'s. An engine that stops
answering holds the thread in ``step()``: :meth:`Driver.abandon` ends the run from another
thread (:mod:`stepview.engine.driver.books`).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext

from stepview.engine.driver.books import Books
from stepview.engine.driver.figures import StepFigures
from stepview.engine.driver.inbox import IDLE_WAIT_S, Inbox
from stepview.engine.driver.ledger import UNFINISHED_WHY, UNWATCHED_WHY, RequestLedger
from stepview.engine.driver.pacing import Pacing, quiet_too_long
from stepview.engine.driver.publishing import Publisher
from stepview.engine.driver.run_stats import RunStats, hand_over
from stepview.engine.driver.step_faults import explain_step_failure
from stepview.insight.run import RunInsight
from stepview.model.commands import (
    Abort,
    AddRequest,
    Command,
    Pause,
    Resume,
    Schedule,
    Shutdown,
    SingleStep,
)
from stepview.model.engine_api import Engine, LinkState, RecordWait, StepResult, WatchedEngine
from stepview.model.errors import describe
from stepview.model.recent import KEEP_FINISHED
from stepview.model.sink import SnapshotSink
from stepview.model.snapshot import EngineState, RequestState, StepSnapshot

log = logging.getLogger(__name__)

PhaseCallback = Callable[[str], None]
EngineFactory = Callable[[PhaseCallback], Engine]


class Driver:
    """Runs an engine on its own thread and publishes a :class:`StepSnapshot` after each step
    (a :class:`~stepview.model.source.SnapshotSource`)."""

    def __init__(
        self,
        engine_factory: EngineFactory,
        *,
        clock: Callable[[], float] = time.perf_counter,
        history_size: int = 256,
        admit_per_step: int = 0,
        sinks: Sequence[SnapshotSink] = (),
        start_paused: bool = False,
        read_only: str | None = None,
        insight: RunInsight | None = None,
        keep_finished: int = KEEP_FINISHED,
        turn: AbstractContextManager[object] | None = None,
    ) -> None:
        """``read_only``: why this source takes no new requests (``None``: it does).

        ``turn``: held while the loop works (a step read, applied and published), never while
        it waits (for a command, or in the engine's ``has_unfinished``, first thing in each
        turn of the loop). A fleet's watches share one (:mod:`stepview.launch.fleet`): at most
        one of them then competes with the screen's thread for the interpreter lock.

        ``insight`` sees every snapshot before the sinks do (its alerts go into the snapshot,
        its timelines into the results); pass one to share it with sinks that read it.
        """
        self.read_only = read_only
        self.insight = insight if insight is not None else RunInsight()
        self._factory = engine_factory
        self._clock = clock
        self._t0 = clock()
        self._admit_per_step = admit_per_step
        self._turn = nullcontext() if turn is None else turn
        self._thread = threading.Thread(target=self._run, name="stepview-driver", daemon=True)
        # Driver-thread state.
        self._engine: Engine | None = None
        self._running: Engine | None = None  # the engine once started (not on a failure)
        self._watched: WatchedEngine | None = None
        self._ledger = RequestLedger(self._now, keep_finished)
        self._inbox = Inbox(self._now)  # commands, and requests scheduled to arrive later
        self._figures = StepFigures(clock)
        self._out = Publisher(
            self._ledger,
            self._figures,
            self._inbox.arrivals,
            sinks=sinks,
            insight=self.insight,
            history_size=history_size,
        )
        self._pacing = Pacing(start_paused)
        self._stopping = False
        self._books = Books()
        self._stop_deadline: float | None = None  # time.monotonic() by which stop() gives up
        self.hopeless: Callable[[], bool] = lambda: False  # stop() need not wait (own/live)
        self._failed: str | None = None
        self._unfinished = 0
        # What the engine factory raised, if it failed (e.g. a usage error in vLLM's flags).
        self.startup_exception: BaseException | None = None

    # -- SnapshotSource ----------------------------------------------------------------------

    @property
    def accepts_requests(self) -> bool:
        return self.read_only is None

    def start(self) -> None:
        self._thread.start()

    def latest(self) -> StepSnapshot:
        return self._out.latest

    def history(self) -> Sequence[StepSnapshot]:
        return self._out.history()

    def send(self, command: Command) -> None:
        self._inbox.send(command)

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the thread to stop and wait for it, at most ``timeout`` s after the *first* ask.

        Several parties stop the driver on the way out (the app's quit, its unmount, the
        command after the app): one deadline for all. No wait once ``hopeless()``."""
        now = time.monotonic()
        if self._stop_deadline is None:
            self._stop_deadline = now + timeout
        self._inbox.send(Shutdown())
        end = min(now + timeout, self._stop_deadline)
        while self._thread.is_alive() and time.monotonic() < end and not self.hopeless():
            self._thread.join(max(0.0, min(0.1, end - time.monotonic())))

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def abandon(self, timeout: float = 0.5) -> bool:
        """End the run here, the driver thread stuck in the engine (:meth:`stop` gave up):
        requests in flight or queued end unfinished, the sinks close. False, doing nothing,
        when the thread kept its books ``timeout`` s (stuck elsewhere: in a sink)."""
        with self._books.taken(timeout) as held:
            if held and not self._books.closed:
                log.warning("the engine did not stop in time; the run ends without it")
                self._books.abandoned = True
                self._drain_commands(block=False)  # requests sent while it hung in start-up
                self._end_run()
            return held

    def join(self, timeout: float | None = None) -> None:
        """Wait for the driver thread to end (after a shutdown, or in headless runs)."""
        self._thread.join(timeout)

    @property
    def run_stats(self) -> RunStats:
        """Totals so far; exact once the driver thread has ended (read it after :meth:`join`)."""
        return self._figures.run_stats(self._ledger.finished_count, self._now())

    @property
    def unfinished(self) -> int:
        """How many requests were still pending or running when the driver stopped (each
        ended as ``UNFINISHED``, with its tokens so far); final once the thread has ended."""
        return self._unfinished

    @property
    def error(self) -> str | None:
        """Why the engine failed (start-up or a step), if it did."""
        return self._failed

    @property
    def link(self) -> LinkState | None:
        """A watched engine's link as of the latest snapshot (how far behind the view is, its
        ranks); None for an engine stepview drives. Read it on the driver thread (a sink)."""
        return self._out.link

    # -- the loop ----------------------------------------------------------------------------

    def _now(self) -> float:
        return self._clock() - self._t0

    def _run(self) -> None:
        with self._books:
            try:
                engine = self._open()
                while engine is not None and self._once(engine, block=True) is not None:
                    pass
                if engine is None and self._failed is not None:  # start-up failed: said,
                    self._wait_for_shutdown()  # until told to stop
            except Exception as exc:
                self._step_failed(exc)
                self._wait_for_shutdown()
            finally:
                self._close()

    def _open(self) -> Engine | None:
        if (engine := self._start()) is not None:
            self._running = engine
            self._publish(self._idle_state())
        return engine

    def _step_failed(self, exc: Exception) -> None:  # the failure shown, in flight ended
        log.error("engine step failed\n%s", traceback.format_exc())
        self._failed = explain_step_failure(exc, self._ledger.active())
        self._ledger.end_in_flight(self._failed)
        self._publish(EngineState.ERROR)

    def _close(self) -> None:
        self._end_run()  # before the shutdown, which can be slow: files complete first
        try:
            if self._engine is not None:
                with self._books.away():
                    self._engine.shutdown()
        except Exception:
            log.exception("engine shutdown failed")
        self._inbox.close()
        if self._running is not None:
            log.info("%s", (stats := self.run_stats).summary())
            hand_over(stats)

    # -- run by a pool (a large fleet's plug-in servers): the same loop, a turn per call ------

    def open(self) -> None:
        """Instead of :meth:`start`: build the engine on the calling thread (a pool's worker),
        then :meth:`advance` until the run is over, then :meth:`close`, one call at a time:
        one thread at a time calls the engine (a watched one, whose reads never block)."""
        self._figures.thread_cpu = None  # the turns run on whichever thread is free
        with self._books:
            try:
                self._open()
            except Exception as exc:
                self._step_failed(exc)

    def advance(self) -> float | None:
        """One turn of the loop, waiting for nothing: the seconds after which the next is due
        (0: it read more than it reported yet; a command sent comes sooner), ``None``: the run
        is over. A paced pool reads again at its pace otherwise: when a turn that stepped came
        back at once, a large fleet read each server as often as the workers could (900 turns
        a second for 750 servers, whose pace asked for 750) and fell 0.56 s behind."""
        with self._books:
            engine = self._running
            if engine is None or self._failed is not None:
                self._answer_failed(block=False)
                return None if self._stopping else IDLE_WAIT_S
            try:
                delay = self._once(engine, block=False)
            except Exception as exc:
                self._step_failed(exc)
                return IDLE_WAIT_S
            watched = self._watched  # a step, and nothing more read: not "more to read now"
            more = delay != 0 or watched is None or watched.has_read()
            return delay if more else IDLE_WAIT_S

    def close(self) -> None:
        with self._books:  # the run's end after advance(), also when it never opened
            self._close()

    def _start(self) -> Engine | None:
        """Build the engine; ``None`` if it failed (the failure shown) or the run was abandoned."""
        try:
            self._set_phase("starting engine")
            with self._books.away():  # start-up may never end either
                engine = self._engine = self._factory(self._phase_from_factory)
            if self._books.abandoned:
                return None  # the run went on without it
            self._out.info = engine.info
            if isinstance(engine, WatchedEngine):
                self._watched = engine
            if isinstance(engine, RecordWait):
                self._inbox.wait_on(engine)  # an idle driver reads a record as it arrives
            self._pacing.engine_started(getattr(engine, "core_hold", None))
            return engine
        except BaseException as exc:  # start-up can fail any way at all; show it, don't die
            if self._books.abandoned:
                return None
            log.error("engine start-up failed\n%s", traceback.format_exc())
            self.startup_exception = exc
            self._failed = f"engine start-up failed: {describe(exc)}"
            self._publish(EngineState.ERROR)
            return None

    def _phase_from_factory(self, phase: str) -> None:  # called away from the books
        with self._books:
            if not self._books.closed:
                self._set_phase(phase)

    def _end_run(self) -> None:
        """Record the run's end, once. Stopped (quit, a signal, a closed pipe, abandoned) with
        requests still to go: they reach the sinks as unfinished, so the results file names
        every request. Then the sinks are closed."""
        if self._books.closed:
            return
        self._books.closed = True
        if self._failed is None:
            why = UNFINISHED_WHY if self._watched is None else UNWATCHED_WHY
            self._unfinished = self._ledger.end_in_flight(why, RequestState.UNFINISHED)
            self._publish(EngineState.STOPPED)
        self._inbox.arrivals.clear()  # requests that never arrived were never in the run
        self._out.close_sinks()

    def _once(self, engine: Engine, *, block: bool) -> float | None:
        """One turn (``block``: waiting a little for a command when there is nothing to step):
        0 when there was a step to take, else :data:`IDLE_WAIT_S`; ``None``: the run ends.
        The engine first: a watched one waits there for its pace, out of the turn; idle and
        not paused, a record arriving ends the wait, as a command does."""
        busy = engine.has_unfinished() or self._ledger.has_pending
        pacing = self._pacing
        runnable = busy and (not pacing.paused or pacing.owed)
        dirty = self._drain_commands(block=block and not runnable, records=not pacing.paused)
        if self._stopping:
            return None
        with self._turn:
            if not self._work(engine, dirty):
                return None
        return 0.0 if runnable else IDLE_WAIT_S

    def _work(self, engine: Engine, dirty: bool) -> bool:
        """One turn of the loop after its waits: a step if there is one; False: the run ends."""
        pacing = self._pacing
        if self._arrive():
            dirty = True
        if pacing.paused and not pacing.owed:
            if dirty:
                self._publish(EngineState.PAUSED)
            return True  # a watched engine's news waits too: pausing holds the view
        watched = self._watched
        if watched is not None and self._out.is_news(watched):
            dirty = True  # reached, lost, busy or idle, described: news without a step
        admitted = self._ledger.admit(engine, self._admit_per_step)
        if engine.has_unfinished():
            if not pacing.take_step():
                return True
            start = self._figures.begin()
            with self._books.away():  # a step may never return
                result = engine.step()
                # Its moment, at once: a watched step is dated by it, less the age it had
                # when the engine let go of it (see _apply).
                returned = self._clock()
            if self._books.abandoned:
                return False  # the run was ended without this thread while it waited
            self._figures.end(start, returned, result)
            self._apply(result, returned - self._t0)
            self._publish(self._idle_state())
        elif dirty or admitted or quiet_too_long(bool(watched), self._out.latest, self._now()):
            pacing.nothing_to_step()
            self._publish(self._idle_state())
        return True

    def _idle_state(self) -> EngineState:
        if self._pacing.paused:
            return EngineState.PAUSED
        watched = self._watched
        if watched is not None:
            return self._out.follow(watched)  # it steps by itself: busy or not is its to say
        engine = self._engine
        busy = self._ledger.has_pending or (engine is not None and engine.has_unfinished())
        return EngineState.RUNNING if busy else EngineState.IDLE

    def _wait_for_shutdown(self) -> None:  # after a failure: commands answered (adds refused)
        while not self._stopping:
            self._answer_failed(block=True)

    def _answer_failed(self, block: bool) -> None:
        if self._drain_commands(block):
            self._publish(EngineState.ERROR)

    # -- commands ----------------------------------------------------------------------------

    def _drain_commands(self, block: bool, records: bool = False) -> bool:
        """Handle every queued command (:meth:`Inbox.take`); True if there was any."""
        handled = False
        for command in self._inbox.take(block, records):
            self._handle(command)
            handled = True
        return handled

    def _handle(self, command: Command) -> None:
        match command:
            case AddRequest():
                self._accept(command)
            case Schedule():
                self._inbox.arrivals.schedule(command, self._now())
            case Abort(request_id=request_id):
                self._abort(request_id)
            case Pause():
                self._pacing.pause()
            case Resume():
                self._pacing.resume()
            case SingleStep():
                self._pacing.single_step()
            case Shutdown():
                self._stopping = True

    def _accept(self, command: AddRequest) -> None:
        refusal = self._failed
        if refusal is None and self._engine is None and not self._books.abandoned:
            refusal = "engine is not running"
        self._ledger.accept(command, refusal, self._engine)

    def _arrive(self) -> bool:
        """Accept the scheduled requests whose time has come; True if any did."""
        due = self._inbox.arrivals.due(self._now())
        for command in due:
            self._accept(command)
        return bool(due)

    def _abort(self, request_id: str) -> None:
        engine = self._engine
        told = self._ledger.abort(request_id, engine)
        if told and engine is not None and self._watched is None and not engine.has_unfinished():
            # The engine is empty and no step will run to report it: the last step's
            # figures would go on counting the aborted request as running.
            self._figures.emptied()

    # -- applying a step ---------------------------------------------------------------------

    def _apply(self, result: StepResult, returned: float) -> None:
        """Fold a step's result, returned at ``returned`` (driver time), into the requests
        (the ledger) and the step figures."""
        now = self._figures.dated(returned, result.age)
        self._ledger.apply(result, now)
        self._figures.fold(result, now)
        if result.scheduled is None:
            self._out.without_entries()

    # -- publishing --------------------------------------------------------------------------

    def _set_phase(self, phase: str) -> None:
        self._out.phase = phase
        self._out.phase_since = self._now()
        self._publish(EngineState.STARTING)

    def _publish(self, state: EngineState) -> None:
        self._out.publish(state, self._now(), self._failed)
