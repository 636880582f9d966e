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

Looking back works in both kinds of run with the same keys. In a live run they move a
:class:`HistoryCursor` over the source's bounded ``history()``: the panes then show the pinned
step, marked as history, while the timer keeps pulling (the engine is not paused by looking
back; ``p`` does that) until ``L`` returns to live. In a replay the same keys become playback
commands (``StepBack``, ``Seek``, …) and the replay thread moves ``latest()`` itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import ClassVar

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Center, Middle, Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Input

from stepview.model.commands import Abort, AddRequest, Pause, Resume, SingleStep
from stepview.model.history import HistoryCursor
from stepview.model.prompts import SEED_PROMPTS
from stepview.model.sampling import DEFAULT_MAX_LOGPROBS
from stepview.model.snapshot import EngineState, RequestView, StepSnapshot
from stepview.model.source import SnapshotSource
from stepview.trace.playback import (
    PlaybackCommand,
    Seek,
    SeekEnd,
    SeekStart,
    SetSpeed,
    StepBack,
    StepForward,
)
from stepview.ui.aborts import AbortTracker, Notice
from stepview.ui.detail import DetailScreen
from stepview.ui.filter_bar import FilterBar
from stepview.ui.filtering import RequestFilter
from stepview.ui.form import NewPrompt, PromptForm
from stepview.ui.goto import GoToStep
from stepview.ui.help import HelpScreen
from stepview.ui.loading import ErrorScreen, LoadingView
from stepview.ui.request_table import RequestTable
from stepview.ui.scrub import (
    HistoryMark,
    Mark,
    ReplayControls,
    ReplayMark,
    mark_text,
    next_speed,
)
from stepview.ui.status_bar import StatusBar

# Keys of the panes and the detail view. Over a modal they are off (letters belong to the
# form's fields); over the error screen only quitting makes sense.
_MAIN_ACTIONS = frozenset(
    {"add", "pause", "step", "abort", "demo", "filter", "help", "quit", "read_only"}
    | {"older", "newer", "oldest", "newest", "goto", "speed"}
)
# Keys that need a live engine: dimmed while it starts and after it failed or stopped.
_ENGINE_ACTIONS = frozenset({"add", "pause", "step", "abort", "demo"})
_NO_ENGINE = frozenset({EngineState.STARTING, EngineState.ERROR, EngineState.STOPPED})
# Keys that move through time; they need at least one step to move over.
_TIME_ACTIONS = frozenset({"older", "newer", "oldest", "newest", "goto"})
# Keys that only a recording can honour (a live engine has one speed: as fast as it can).
_REPLAY_ACTIONS = frozenset({"speed"})
_READ_ONLY = "This is a replay: adding and aborting requests is disabled."
NEWCOMER_HINT = "none yet: press d for the demo prompts, a to add one, ? for help"
"""What an empty live run says in its Pending pane, until the first request arrives."""
# Over a source that takes no requests (a replay), Add and Demo leave the footer; their keys
# fall through to this hidden binding, which says why they do nothing.
_READ_ONLY_BINDING = Binding("a,d", "read_only", show=False)

# The footer holds about 78 columns of keys at 80x24. It shows the keys a newcomer needs
# (Demo to get going, [ to look back); abort, which needs a chosen row anyway, and the rest
# of the history keys are on the help screen, and the HISTORY banner names the way back.

_ENGINE_BINDINGS: list[BindingType] = [
    Binding("a", "add", "Add", tooltip="Add a prompt (form with presets)"),
    Binding("p,space", "pause", "Pause", tooltip="Pause or resume (replay: play or pause)"),
    Binding("s", "step", "Step", tooltip="One step while paused (replay: one forward)"),
    Binding("x", "abort", "Abort", show=False, tooltip="Abort the selected request"),
    Binding("d", "demo", "Demo", tooltip="Queue the seed example's three prompts"),
]
_TIME_BINDINGS: list[BindingType] = [
    Binding(
        "left_square_bracket",
        "older(1)",
        "Prev",
        key_display="[",
        tooltip="One step back; a live engine keeps running",
    ),
    Binding(
        "right_square_bracket",
        "newer(1)",
        "Forward",
        key_display="]",
        show=False,
        tooltip="One step forward; past the newest is live",
    ),
    Binding(
        "left_curly_bracket",
        "older(10)",
        "Back 10",
        key_display="{",
        show=False,
        tooltip="Ten steps back",
    ),
    Binding(
        "right_curly_bracket",
        "newer(10)",
        "Forward 10",
        key_display="}",
        show=False,
        tooltip="Ten steps forward",
    ),
    Binding(
        "less_than_sign",
        "oldest",
        "Oldest",
        key_display="<",
        show=False,
        tooltip="The oldest step kept (replay: the first)",
    ),
    Binding(
        "L,greater_than_sign",
        "newest",
        "Live",
        show=False,
        tooltip="Back to live (replay: the last step)",
    ),
    Binding(
        "colon",
        "goto",
        "Go to step",
        key_display=":",
        show=False,
        tooltip="Go to a step number",
    ),
    Binding(
        "plus,equals_sign",
        "speed(True)",
        "Faster",
        key_display="+",
        show=False,
        tooltip="Replay faster (up to 16x)",
    ),
    Binding(
        "minus",
        "speed(False)",
        "Slower",
        key_display="-",
        show=False,
        tooltip="Replay slower (down to 0.25x)",
    ),
]


class StepviewApp(App[None]):
    """Watch an engine step by step; keyboard-driven, usable at 80x24."""

    CSS_PATH = "stepview.tcss"
    TITLE = "stepview"
    # Every key is in the footer and on the help screen; the palette would only take space.
    ENABLE_COMMAND_PALETTE = False
    POLL_HZ: ClassVar[float] = 15.0
    """How often ``source.latest()`` is pulled; above ~15 Hz the terminal, not the engine,
    becomes the bottleneck over ssh."""
    CPU_BUDGET: ClassVar[float] = 0.05
    """Default ``cpu_budget`` of a live run: the share of one core the UI may spend drawing
    new snapshots while the engine runs.

    The UI thread and the engine thread share Python's GIL: every millisecond spent drawing
    is a millisecond an engine step waits (measured: a UI at 20 % of a core made steps 30 %
    slower). Above the budget a tick is skipped, so a huge batch redraws less often instead
    of slowing the engine it shows; keys and scrolling are not affected."""
    MAX_SKIP_S: ClassVar[float] = 0.5
    """Whatever the budget, a new snapshot is shown at least this often (2 Hz)."""
    STOP_TIMEOUT_S: ClassVar[float] = 4.0
    """How long quitting waits for the source (the engine ends its step and shuts down, ~1 s
    for vLLM on CPU). One budget for the whole way out: the driver's ``stop`` counts every
    wait from the first ask, so stepview is gone within 5 s even when the engine is stuck."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *_ENGINE_BINDINGS,
        *_TIME_BINDINGS,
        Binding(
            "slash",
            "filter",
            "Filter",
            key_display="/",
            tooltip="Filter by text, or by is:STATE (is:aborted, is:length)",
        ),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="This help"),
        Binding("q", "quit", "Quit", tooltip="Stop the engine and quit"),
        # In a terminal, ctrl+c means "stop this program": unlike q it also works over the
        # form and the help, where Textual would copy text (and only hint at ctrl+q).
        # A system binding: the README names it beside q, the help lists the app's own keys.
        Binding(
            "ctrl+c",
            "interrupt",
            "Quit",
            show=False,
            priority=True,
            system=True,
            tooltip="Stop the engine and quit, from any screen",
        ),
        Binding(
            "tab",
            "focus_next",
            "Next pane",
            show=False,
            tooltip="Next pane (Pending, Running, Finished)",
        ),
        Binding(
            "shift+tab", "focus_previous", "Previous pane", show=False, tooltip="Previous pane"
        ),
        _READ_ONLY_BINDING,
    ]

    def __init__(
        self,
        source: SnapshotSource,
        *,
        replay: bool = False,
        clock: Callable[[], float] | None = time.monotonic,
        cpu_budget: float | None = None,
    ) -> None:
        """``clock`` only extends the start-up timer between snapshots; ``None`` for tests.

        ``cpu_budget`` (e.g. :attr:`CPU_BUDGET`) caps the UI's drawing while the engine runs;
        ``None`` shows every tick's snapshot, which deterministic tests need.

        With ``replay`` the history keys drive the source's playback when it has any
        (:class:`ReplayControls`, as ``ReplaySource`` does).
        """
        # ansi_color: the theme is ANSI anyway; saying so up front makes NO_COLOR drop colour
        # codes (the terminal's own colours) instead of a monochrome filter over the ANSI
        # theme, which drew black on black.
        super().__init__(ansi_color=True)
        self.source = source
        self._aborts = AbortTracker()
        self.replay = replay
        self._playback = source if replay and isinstance(source, ReplayControls) else None
        self._cursor = HistoryCursor(source)
        self._speed: float | None = None  # last speed asked for; the status may lag behind
        self._last_step = (0, 0)  # (snapshots read, last step among them) of a replay
        self._warned = False
        self._replay_ready = False  # the replay has a snapshot to move over
        self.clock = clock
        self._pulled_at = 0.0
        self.shown: StepSnapshot | None = None
        """The snapshot on screen: everything drawn is computed from it, and only from it."""
        self._pulled: StepSnapshot | None = None
        self.cpu_budget = cpu_budget
        self._budget_mark = (0.0, 0.0)  # (wall, UI-thread CPU) when a snapshot was last taken
        self._next_id = 1
        self._quitting = False
        self._error_reported = ""
        self._filter = RequestFilter()
        self._focus_before_filter: RequestTable | None = None
        self.theme = "ansi-dark"

    # -- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Middle(id="loading"), Center():
            yield LoadingView()
        with Vertical(id="panes"):
            yield RequestTable("Pending", id="pending")
            yield RequestTable("Running", id="running")
            yield RequestTable("Finished", id="finished", append_only=True)
            yield FilterBar(id="filter")
        yield Footer()

    def on_mount(self) -> None:
        # Looked up once: show_snapshot runs up to POLL_HZ times a second.
        self._status = self.query_one(StatusBar)
        self._loading = self.query_one(LoadingView)
        self._pending_pane = self.query_one("#pending", RequestTable)
        self._running_pane = self.query_one("#running", RequestTable)
        self._finished_pane = self.query_one("#finished", RequestTable)
        self._filter_bar = self.query_one(FilterBar)
        self.source.start()
        # Render once now: the first frame shows real data, and a test's key presses cannot
        # race the first timer tick.
        self.poll()
        self.set_interval(1 / self.POLL_HZ, self.poll)
        self._running_pane.focus()

    # -- snapshots -------------------------------------------------------------------------

    def poll(self) -> None:
        """Pull the newest snapshot; cheap and does nothing when the source has not moved.

        While the user looks at history the newest snapshot is pulled but not shown; only the
        banner's "of N" moves (and the shown step, if the bounded history dropped it).
        """
        latest = self.source.latest()
        if latest is not self._pulled and self._over_budget():
            return
        if latest is self._pulled:
            if self._playback is not None:
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
        if latest.engine_state is EngineState.ERROR:
            self._cursor.go_live()  # a failure is news: show it, wherever the user was
        if self._cursor.live:
            self.show_snapshot(latest)
            return
        pinned = self._cursor.current()
        if pinned is not self.shown:
            self.show_snapshot(pinned)
        else:
            self._show_where()

    def _over_budget(self) -> bool:
        """True when drawing since the last new snapshot used more than ``cpu_budget``."""
        budget = self.cpu_budget
        if budget is None:
            return False
        wall, cpu = time.perf_counter(), time.thread_time()
        last_wall, last_cpu = self._budget_mark
        elapsed = wall - last_wall
        if elapsed < self.MAX_SKIP_S and cpu - last_cpu > budget * elapsed:
            return True
        self._budget_mark = (wall, cpu)
        return False

    def show_snapshot(self, snapshot: StepSnapshot) -> None:
        """Make ``snapshot`` the one on screen, updating only what it changed."""
        previous, self.shown = self.shown, snapshot
        starting = snapshot.engine_state is EngineState.STARTING
        self.screen_stack[0].set_class(starting, "-starting")
        if starting:
            self._loading.show(snapshot)
        else:
            self._show_requests(snapshot)
        if previous is None or previous.engine_state is not snapshot.engine_state:
            self.refresh_bindings()
        if snapshot.engine_state is EngineState.ERROR:
            self._report_error(snapshot)
        for screen in self.screen_stack:
            if isinstance(screen, DetailScreen):
                screen.show_snapshot(snapshot)
        self._show_where()

    def _mark(self) -> Mark:
        """Where ``shown`` is: ``None`` when live, else in history or in a replay."""
        if self._playback is not None:
            status = self._playback.status
            count, last = self._last_step
            if status.count != count:
                history = self.source.history()
                last = history[-1].step if history else 0
                self._last_step = (status.count, last)
            return ReplayMark(status, last)
        if self._cursor.live:
            return None
        return HistoryMark(self._pulled.step if self._pulled is not None else 0)

    def _show_where(self) -> None:
        """Mark ``shown`` as live, history or replay in the status bar and detail views."""
        shown = self.shown
        if shown is None:
            return
        mark = self._mark()
        if isinstance(mark, ReplayMark) and bool(mark.status.count) is not self._replay_ready:
            self._replay_ready = bool(mark.status.count)
            self.refresh_bindings()  # the first snapshot read turns the playback keys on
        self._status.show(shown, mark)
        self.set_class(isinstance(mark, HistoryMark), "-history")
        where = mark_text(mark, shown.step)
        for screen in self.screen_stack:
            if isinstance(screen, DetailScreen):
                screen.show_where(where)
        if isinstance(mark, ReplayMark) and mark.status.warning and not self._warned:
            self._warned = True
            self.notify(mark.status.warning, title="Damaged trace", severity="warning", timeout=10)

    def _show_requests(self, snapshot: StepSnapshot) -> None:
        pending: list[RequestView] = []
        running: list[RequestView] = []
        for view in snapshot.active:
            (running if view.state.pane == "running" else pending).append(view)
        now = snapshot.clock
        self._pending_pane.show(pending, now)
        self._running_pane.show(running, now)
        empty = self.source.accepts_requests and not snapshot.active and not snapshot.finished
        self._pending_pane.set_empty_text(NEWCOMER_HINT if empty else "none")
        # The Frozen view itself, never a copy: the pane reads only the rows on screen.
        self._finished_pane.show(snapshot.finished, now)

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
        if action not in _MAIN_ACTIONS:
            return True
        if isinstance(self.screen, ModalScreen):
            return False
        if isinstance(self.screen, ErrorScreen):
            return action == "quit"
        if action == "filter" and self.screen is not self.screen_stack[0]:
            return False  # the filter bar belongs to the panes
        if action in _REPLAY_ACTIONS and self._playback is None:
            return False
        # Over a source that takes no requests, Add and Demo are hidden; read_only takes
        # their keys to say why.
        writing = action in {"add", "demo", "read_only"}
        if writing and (action == "read_only") == self.source.accepts_requests:
            return False
        # The live state (or the replayed one), not the shown one: keys act on the engine.
        state = self._pulled.engine_state if self._pulled is not None else EngineState.STARTING
        if self._playback is not None:
            # Playback keys work on any recorded state (start-up included) once the trace
            # has a snapshot; add, abort and demo stay on to say why they do nothing.
            if action in _TIME_ACTIONS | _REPLAY_ACTIONS | {"pause", "step"}:
                return True if self._playback.status.count else None
            return True
        if action in _TIME_ACTIONS:
            if state is EngineState.STARTING:
                return None
            return None if action in {"newer", "newest"} and self._cursor.live else True
        if action in _ENGINE_ACTIONS and state in _NO_ENGINE:
            return None
        if action == "step" and state is not EngineState.PAUSED:
            return None
        return True

    def _read_only(self) -> bool:
        if self.source.accepts_requests:
            return False
        self.notify(_READ_ONLY, severity="warning")
        return True

    def new_request_id(self) -> str:
        """``u1``, ``u2``, …, skipping any id the shown snapshot already has."""
        while True:
            request_id = f"u{self._next_id}"
            self._next_id += 1
            live = self._pulled
            if live is None or live.find(request_id) is None:
                return request_id

    # -- actions ---------------------------------------------------------------------------

    def action_add(self) -> None:
        if self._read_only():
            return
        max_logprobs = self.shown.info.max_logprobs if self.shown else DEFAULT_MAX_LOGPROBS
        self.push_screen(PromptForm(max_logprobs=max_logprobs), self._submitted)

    def _submitted(self, result: NewPrompt | None) -> None:
        if result is not None:
            request_id = self.new_request_id()
            self.source.send(AddRequest(request_id, result.prompt, result.spec))
            self.notify(f"{request_id} queued; it joins at the next step", timeout=2)

    def action_demo(self) -> None:
        if self._read_only():
            return
        ids = []
        for prompt, spec in SEED_PROMPTS:
            request_id = self.new_request_id()
            ids.append(request_id)
            self.source.send(AddRequest(request_id, prompt, spec))
        self.notify(f"demo prompts queued: {', '.join(ids)}", timeout=2)

    def action_pause(self) -> None:
        if self._playback is not None:
            paused = not self._playback.status.playing
        else:
            paused = self._pulled is not None and self._pulled.engine_state is EngineState.PAUSED
        self.source.send(Resume() if paused else Pause())

    def action_step(self) -> None:
        self.source.send(SingleStep())

    def action_abort(self) -> None:
        """Abort the request under the cursor now, once (see :mod:`stepview.ui.aborts`)."""
        if self._read_only():
            return
        request_id, notice = self._aborts.ask(self.current_request())
        if request_id is not None:
            self.source.send(Abort(request_id))
        self._tell(notice)

    def _tell(self, notice: Notice) -> None:
        if notice.warning:
            self.notify(notice.text, severity="warning")
        else:
            self.notify(notice.text, timeout=2)

    def action_read_only(self) -> None:
        self._read_only()

    @on(RequestTable.Chosen)
    def _open_detail(self, event: RequestTable.Chosen) -> None:
        if self.shown is not None:
            self.push_screen(DetailScreen(event.view.request_id, self.shown))
            self._show_where()

    # -- looking back: history of a live run, or playback of a replay ----------------------

    def _replay(self, command: PlaybackCommand) -> bool:
        """Send ``command`` if this is a replay (it moves on the replay thread); else False."""
        if self._playback is None:
            return False
        self._playback.send(command)
        return True

    def _scrub(self, snapshot: StepSnapshot) -> None:
        """Show where the history cursor moved (the engine runs on either way)."""
        self.show_snapshot(snapshot)
        self.refresh_bindings()  # forward and live are on only while looking back

    def action_older(self, count: int) -> None:
        if not self._replay(StepBack(count)):
            self._from_shown()
            self._scrub(self._cursor.back(count))

    def _from_shown(self) -> None:
        """Look back from the step on screen, not from the newest one.

        Live, the screen trails a fast engine by up to a timer tick (dozens of steps), and the
        cursor counts from the newest snapshot kept: pinning the shown step first makes ``[``
        land one step before what the user saw. ``jump`` pins the first snapshot of that step,
        which is the shown one while the engine runs (one snapshot per step).
        """
        shown = self.shown
        if self._cursor.live and shown is not None and shown is not self.source.latest():
            self._cursor.jump(shown.step)

    def action_newer(self, count: int) -> None:
        if not self._replay(StepForward(count)):
            self._scrub(self._cursor.forward(count))

    def action_oldest(self) -> None:
        if not self._replay(SeekStart()):
            self._scrub(self._cursor.oldest())

    def action_newest(self) -> None:
        if not self._replay(SeekEnd()):
            self._scrub(self._cursor.go_live())

    def action_goto(self) -> None:
        history = self.source.history()
        first, last = (history[0].step, history[-1].step) if history else (0, 0)
        self.push_screen(GoToStep(first, last), self._go_to)

    def _go_to(self, step: int | None) -> None:
        if step is not None and not self._replay(Seek(step)):
            self._scrub(self._cursor.jump(step))

    def action_speed(self, faster: bool) -> None:
        if self._playback is None:
            return
        current = self._speed if self._speed is not None else self._playback.status.speed
        self._speed = next_speed(current, faster)
        self._playback.send(SetSpeed(self._speed))

    def action_help(self) -> None:
        self.push_screen(
            HelpScreen(
                [
                    (
                        "Engine and requests",
                        [
                            b
                            for b in self.BINDINGS
                            if b not in _TIME_BINDINGS and b is not _READ_ONLY_BINDING
                        ],
                    ),
                    ("History and replay", _TIME_BINDINGS),
                    ("In a pane", RequestTable.BINDINGS),
                    ("In the detail view", DetailScreen.BINDINGS),
                    ("In the add-prompt form", PromptForm.BINDINGS),
                ],
                notes=[
                    "Pending: waiting for the engine, or preempted (KV cache freed).",
                    "Running: prefill x/y tokens computed, then decoding.",
                    "Latency: queued = arrival to scheduled, ttft = arrival to first token.",
                    "Looking back does not pause the engine (p does); L returns to live.",
                ],
            )
        )

    # -- filter ----------------------------------------------------------------------------

    def action_filter(self) -> None:
        focused = self.focused
        if isinstance(focused, RequestTable):
            self._focus_before_filter = focused
        self._filter_bar.add_class("-shown")
        self._filter_bar.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._filter = RequestFilter.parse(event.value)
        for table in (self._pending_pane, self._running_pane, self._finished_pane):
            table.set_filter(self._filter)

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        """Enter: keep the filter (and the bar, to show it) and go back to the panes."""
        self._filter_bar.set_class(self._filter.active, "-shown")
        (self._focus_before_filter or self._finished_pane).focus()

    @on(FilterBar.Cleared)
    def _filter_cleared(self) -> None:
        self._filter_bar.remove_class("-shown")
        (self._focus_before_filter or self._finished_pane).focus()

    # -- quitting --------------------------------------------------------------------------

    async def action_quit(self) -> None:
        """Stop the source off the event loop (it may be mid-step), then exit."""
        if self._quitting:
            return
        self._quitting = True
        self.notify("stopping the engine…", timeout=5)
        await asyncio.to_thread(self.source.stop, self.STOP_TIMEOUT_S)
        self.exit()

    async def action_interrupt(self) -> None:
        """ctrl+c, and SIGINT/SIGTERM/SIGHUP (see ``launch/runner.py``): quit as ``q`` does."""
        await self.action_quit()

    def on_unmount(self) -> None:
        # Exited another way (an exception, say): do not leave the producer thread behind.
        if self.source.alive:
            self.source.stop(timeout=self.STOP_TIMEOUT_S)
