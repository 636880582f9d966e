"""The stepview app: three panes of requests over a source of step snapshots.

The engine runs on the source's own thread and publishes one immutable
:class:`StepSnapshot` per step. The app never waits on it: a timer at
:attr:`StepviewApp.POLL_HZ` pulls ``source.latest()``, does nothing when it is the same object
as last time, and otherwise hands it to :meth:`StepviewApp.show_snapshot`, which is the one
place that decides what is on screen (``self.shown``). Widgets diff by request identity and
repaint only what changed, so a fast engine costs the UI one cheap pass per tick and never
queues work (see platform notes, "Textual under a fast producer").

User actions become plain commands sent to the source; their effect shows up in a later
snapshot, like everything else.

Looking back works in both kinds of run with the same keys, through one
:class:`~stepview.ui.main.step_navigation.Timeline` chosen from the source when the app is
built. In a live run the panes show the pinned step, marked as history, while the timer keeps
pulling (the engine is not paused by looking back; ``p`` does that) until ``L`` returns to
live. In a replay the keys become playback commands and the replay thread moves ``latest()`` itself.
The keys and the rules saying which of them apply are in :mod:`stepview.ui.bindings`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Center, Middle
from textual.screen import ModalScreen

from stepview.model.commands import Abort, Pause, Resume, SingleStep
from stepview.model.flight import ON_KEY, FlightControl
from stepview.model.snapshot import EngineState, RequestView, StepSnapshot
from stepview.model.source import STOP_TIMEOUT_S, SnapshotSource
from stepview.model.stacks import RecordedStacks
from stepview.ui.bindings import (
    APP_BINDINGS,
    MAIN_ACTIONS,
    Over,
    action_enabled,
)
from stepview.ui.detail.screen import DetailScreen
from stepview.ui.detail.strip import StepChosen
from stepview.ui.dialogs.adding import Adder
from stepview.ui.dialogs.goto import GoToStep
from stepview.ui.dialogs.help import app_help
from stepview.ui.drafts import AskToAdd, clone_of
from stepview.ui.footer import FittingFooter
from stepview.ui.main import draw_budget
from stepview.ui.main.aborts import AbortTracker, Notice
from stepview.ui.main.flight_key import FlightKey
from stepview.ui.main.loading import ErrorScreen, LoadingView
from stepview.ui.main.panes import RequestPanes
from stepview.ui.main.request_table import RequestTable
from stepview.ui.main.server_panel import ServerPanel
from stepview.ui.main.status_bar import StatusBar
from stepview.ui.main.step_navigation import timeline_for
from stepview.ui.plain import PlainTextApp
from stepview.ui.scrub import HistoryMark, Mode, ReplayMark, mark_text
from stepview.ui.terminal_driver import driver_class
from stepview.ui.theme import THEME
from stepview.ui.views.latency_view import LatencyScreen
from stepview.ui.views.stacks_view import StacksScreen
from stepview.ui.views.step_view import StepScreen

# Full screens that show the step on screen and follow the history keys.
_FOLLOWERS = (DetailScreen, StepScreen, LatencyScreen)


class StepviewApp(PlainTextApp[None]):
    """Watch an engine step by step; keyboard-driven, usable at 80x24."""

    CSS_PATH = "stepview.tcss"
    TITLE = "stepview"
    # Every key is in the footer and on the help screen; the palette would only take space.
    ENABLE_COMMAND_PALETTE = False
    POLL_HZ: ClassVar[float] = 15.0
    """How often ``source.latest()`` is pulled; above ~15 Hz the terminal, not the engine,
    becomes the bottleneck over ssh."""
    CPU_BUDGET: ClassVar[float] = draw_budget.CPU_BUDGET
    """Default ``cpu_budget`` of a live run (why: :mod:`stepview.ui.main.draw_budget`)."""

    BINDINGS: ClassVar[list[BindingType]] = APP_BINDINGS

    def __init__(
        self,
        source: SnapshotSource,
        *,
        clock: Callable[[], float] | None = time.monotonic,
        cpu_budget: float | None = None,
        flight: FlightControl | None = None,
    ) -> None:
        """``clock`` only extends the start-up timer between snapshots; ``None`` for tests.

        ``cpu_budget`` (e.g. :attr:`CPU_BUDGET`) caps the UI's drawing while the engine runs;
        ``None`` shows every tick's snapshot, which deterministic tests need.

        A source with playback controls (``ReplaySource``) is replayed: the history keys
        drive its playback.
        """
        super().__init__(driver_class=driver_class(), ansi_color=True)  # ui.theme, ui.terminal
        self.source = source
        self._aborts = AbortTracker()
        self._timeline = timeline_for(source)
        self._warned = False
        self._noted = False
        self._stacks_noted = False
        self._flight = FlightKey(flight)  # --flight-recorder: the F key, where it wrote
        self._replay_ready = False  # the replay has a snapshot to move over
        self.clock = clock
        self._pulled_at = 0.0
        self.shown: StepSnapshot | None = None
        """The snapshot on screen: everything drawn is computed from it, and only from it."""
        self._pulled: StepSnapshot | None = None
        self._budget = draw_budget.DrawBudget(cpu_budget)
        self.adder = Adder(self, source, lambda: self._pulled)
        self._quitting = False
        self._error_reported = ""
        self.theme = THEME

    # -- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Middle(id="loading"), Center():
            yield LoadingView()
        yield ServerPanel(id="server")  # a server watched through its /metrics alone
        yield RequestPanes(id="panes")  # Pending, Running, Finished and the filter bar
        yield FittingFooter()

    def on_mount(self) -> None:
        # Looked up once: show_snapshot runs up to POLL_HZ times a second.
        self._status = self.query_one(StatusBar)
        self._server = self.query_one(ServerPanel)
        self._loading = self.query_one(LoadingView)
        self._panes = self.query_one(RequestPanes)
        self.source.start()
        # Render once now: the first frame shows real data, and a test's key presses cannot
        # race the first timer tick.
        self.poll()
        self.set_interval(1 / self.POLL_HZ, self.poll)
        self._panes.running.focus()

    # -- snapshots -------------------------------------------------------------------------

    def poll(self) -> None:
        """Pull the newest snapshot; cheap and does nothing when the source has not moved.

        While the user looks at history the newest snapshot is pulled but not shown; only the
        banner's "of N" moves (and the shown step, if the bounded history dropped it).
        """
        self._flight.tell(self._status, self.notify)  # a flight recording written, or done
        latest = self.source.latest()
        if latest is not self._pulled and self._budget.over():
            return
        if latest is self._pulled:
            if self._timeline.mode is Mode.REPLAY:
                # Paused, resumed or sped up without a new snapshot. A recorded start-up
                # phase keeps its recorded duration: the wall clock is not the engine's.
                self._show_where()
            elif latest.engine_state is EngineState.STARTING and self.clock is not None:
                self._loading.show(latest, self.clock() - self._pulled_at)
            return
        previous = self._pulled
        self._pulled = latest
        for notice in self._aborts.settle(latest):
            self._tell(notice)
        self._pulled_at = self.clock() if self.clock is not None else 0.0
        if previous is None or previous.engine_state is not latest.engine_state:
            self.refresh_bindings()  # engine keys follow the live engine, not the shown step
        pinned = self._timeline.follow(latest)
        if pinned is None:
            self.show_snapshot(latest)
        elif pinned is not self.shown:
            self.show_snapshot(pinned)
        else:
            self._show_where()

    def show_snapshot(self, snapshot: StepSnapshot) -> None:
        """Make ``snapshot`` the one on screen, updating only what it changed."""
        previous, self.shown = self.shown, snapshot
        starting = snapshot.engine_state is EngineState.STARTING
        self.screen_stack[0].set_class(starting, "-starting")
        self.screen_stack[0].set_class(self._server.show(snapshot.server), "-metrics")
        if starting:
            self._loading.show(snapshot)
        else:
            self._panes.show(snapshot, self.source.accepts_requests)
        if previous is None or previous.engine_state is not snapshot.engine_state:
            self.refresh_bindings()
        if snapshot.engine_state is EngineState.ERROR:
            self._report_error(snapshot)
        for screen in self.screen_stack:
            if isinstance(screen, _FOLLOWERS):
                screen.show_snapshot(snapshot)
        self._show_where()

    def _show_where(self) -> None:
        """Mark ``shown`` as live, history or replay in the status bar and detail views."""
        shown = self.shown
        if shown is None:
            return
        mark = self._timeline.mark(self._pulled)
        if isinstance(mark, ReplayMark) and bool(mark.status.count) is not self._replay_ready:
            self._replay_ready = bool(mark.status.count)
            self.refresh_bindings()  # the first snapshot read turns the playback keys on
        self._status.show(shown, mark)
        self.set_class(isinstance(mark, HistoryMark), "-history")
        where = mark_text(mark, shown.step)
        for screen in self.screen_stack:
            if isinstance(screen, _FOLLOWERS):
                screen.show_where(where)
        if isinstance(mark, ReplayMark) and mark.status.warning and not self._warned:
            self._warned = True
            self.notify(mark.status.warning, title="Damaged trace", severity="warning", timeout=10)
        if isinstance(mark, ReplayMark) and mark.status.note and not self._noted:
            self._noted = True  # what the trace is (a flight recording, a later part)
            self.notify(mark.status.note, title="About this trace", timeout=15)
        if isinstance(mark, ReplayMark) and mark.status.stacks and not self._stacks_noted:
            self._stacks_noted = True
            self.refresh_bindings()  # K is on from now
            self.notify(
                "This recording holds the engine core's thread stacks: K shows them.",
                title="Engine core stacks",
                timeout=15,
            )

    def _report_error(self, snapshot: StepSnapshot) -> None:
        message = snapshot.phase or "The engine stopped with an error."
        if message == self._error_reported:
            return
        self._error_reported = message
        self.push_screen(ErrorScreen(message, can_go_back=snapshot.step > 0))

    # -- what the keys act on --------------------------------------------------------------

    def current_request(self) -> RequestView | None:
        """The request a key acts on: the detail view's, else the focused pane's selection."""
        if isinstance(self.screen, DetailScreen):
            return self.screen.view
        focused = self.focused
        if isinstance(focused, RequestTable):
            return focused.selected
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide keys that do not apply here; dim (``None``) those that do not apply *now*."""
        if action == "flight":  # any screen but a modal one; never over a replay
            live = self._timeline.mode is not Mode.REPLAY
            return live and not isinstance(self.screen, ModalScreen)
        if action == "stacks":  # a replayed flight recording that holds them, over the panes
            return bool(self._recorded_stacks()) and self._over() is Over.PANES
        if action not in MAIN_ACTIONS:
            return True  # Textual's own keys and the panes': not the app's to decide
        return action_enabled(
            action,
            over=self._over(),
            mode=self._timeline.mode,
            # The live state (or the replayed one), not the shown one: keys act on the engine.
            engine=self._pulled.engine_state if self._pulled is not None else EngineState.STARTING,
            ready=self._timeline.ready,
            writable=self.source.accepts_requests,
        )

    def _over(self) -> Over:
        """What the keys are pressed over, for :func:`~stepview.ui.bindings.action_enabled`."""
        screen = self.screen
        if isinstance(screen, ModalScreen):
            return Over.MODAL
        if isinstance(screen, ErrorScreen):
            return Over.ERROR
        return Over.PANES if screen is self.screen_stack[0] else Over.DETAIL

    # -- actions ---------------------------------------------------------------------------

    def action_add(self) -> None:
        self.adder.open_form()

    def action_clone(self) -> None:
        """The chosen request's prompt and parameters in the add form: an A/B pair."""
        view = self.current_request()
        if view is not None:
            self.adder.open_form(clone_of(view))

    @on(AskToAdd)
    def _ask_to_add(self, event: AskToAdd) -> None:
        self.adder.open_form(event.draft)  # a fork, from the detail view

    def action_demo(self, chat: bool = False) -> None:
        self.adder.demo(chat)

    def action_load(self) -> None:
        """``w``: the load dialog, filled with the last load started (or the defaults)."""
        self.adder.load()

    def action_pause(self) -> None:
        paused = self._timeline.paused(self._pulled)
        self.source.send(Resume() if paused else Pause())

    def action_step(self) -> None:
        self.source.send(SingleStep())

    def action_abort(self) -> None:
        """Abort the request under the cursor now, once (see :mod:`stepview.ui.main.aborts`)."""
        if self.adder.read_only():
            return
        request_id, notice = self._aborts.ask(self.current_request())
        if request_id is not None:
            self.source.send(Abort(request_id))
        self._tell(notice)

    def _tell(self, notice: Notice) -> None:
        self.notify(notice.text, severity=notice.severity, timeout=notice.timeout)

    def action_flight(self, by: str = ON_KEY) -> None:
        self.notify(self._flight.ask(by), title="Flight recorder")

    def _recorded_stacks(self) -> tuple[RecordedStacks, ...]:
        mark = self._timeline.mark(self._pulled)
        return mark.status.stacks if isinstance(mark, ReplayMark) else ()

    def action_stacks(self) -> None:
        """``K``: the engine cores' thread stacks a replayed flight recording holds."""
        takes = self._recorded_stacks()
        if takes:
            self.push_screen(StacksScreen(takes))

    def action_read_only(self) -> None:
        self.adder.read_only()

    @on(RequestTable.Chosen)
    def _open_detail(self, event: RequestTable.Chosen) -> None:
        if self.shown is not None:
            self.push_screen(DetailScreen(event.view.request_id, self.shown, self.source.history))
            self._show_where()

    def action_step_view(self) -> None:
        """``v``: the scheduler's decisions in the step on screen (read-only, replay too)."""
        if self.shown is not None:
            self.push_screen(StepScreen(self.shown, self.source.history))
            self._show_where()

    def action_latency(self) -> None:
        """``t``: latency percentiles of the requests finished by the step on screen."""
        if self.shown is not None:
            self.push_screen(LatencyScreen(self.shown))
            self._show_where()

    # -- looking back: history of a live run, or playback of a replay ----------------------

    def _moved(self, snapshot: StepSnapshot | None) -> None:
        """Show where a live run's history moved (a replay moves ``latest()`` itself)."""
        if snapshot is not None:
            self.show_snapshot(snapshot)
            self.refresh_bindings()  # forward and live are on only while looking back

    def action_older(self, count: int) -> None:
        self._moved(self._timeline.back(count, self.shown))

    def action_newer(self, count: int) -> None:
        self._moved(self._timeline.forward(count))

    def action_oldest(self) -> None:
        self._moved(self._timeline.oldest())

    def action_newest(self) -> None:
        self._moved(self._timeline.newest())

    def action_goto(self) -> None:
        history = self.source.history()
        first, last = (history[0].step, history[-1].step) if history else (0, 0)
        self.push_screen(GoToStep(first, last), self._go_to)

    @on(StepChosen)
    def _step_chosen(self, event: StepChosen) -> None:
        self._go_to(event.step)  # a point chosen on a request's timeline strip

    def _go_to(self, step: int | None) -> None:
        if step is not None:
            self._moved(self._timeline.seek(step))

    def action_speed(self, faster: bool) -> None:
        self._timeline.change_speed(faster)

    def action_help(self) -> None:
        self.push_screen(app_help(self.BINDINGS))

    # -- filter (the panes apply it: :mod:`stepview.ui.main.panes`) ------------------------

    def action_filter(self) -> None:
        self._panes.open_filter(self.focused)

    # -- quitting --------------------------------------------------------------------------

    async def action_quit(self) -> None:
        """Stop the source off the event loop (it may be mid-step), then exit."""
        if self._quitting:
            return
        self._quitting = True
        self.notify("stopping the engine…", timeout=5)
        await asyncio.to_thread(self.source.stop, STOP_TIMEOUT_S)
        self.exit()

    async def action_interrupt(self) -> None:
        """ctrl+c, and SIGINT/SIGTERM/SIGHUP (see ``launch/runner.py``): quit as ``q`` does."""
        await self.action_quit()

    def on_unmount(self) -> None:
        # Exited another way (an exception, say): do not leave the producer thread behind.
        if self.source.alive:
            self.source.stop(timeout=STOP_TIMEOUT_S)
