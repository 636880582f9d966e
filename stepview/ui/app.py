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
from stepview.model.prompts import SEED_PROMPTS
from stepview.model.sampling import DEFAULT_MAX_LOGPROBS
from stepview.model.snapshot import EngineState, RequestView, StepSnapshot
from stepview.model.source import SnapshotSource
from stepview.ui.detail import DetailScreen
from stepview.ui.filter_bar import FilterBar
from stepview.ui.filtering import RequestFilter
from stepview.ui.form import NewPrompt, PromptForm
from stepview.ui.help import HelpScreen
from stepview.ui.loading import ErrorScreen, LoadingView
from stepview.ui.request_table import RequestTable
from stepview.ui.status_bar import StatusBar

# Keys of the panes and the detail view. Over a modal they are off (letters belong to the
# form's fields); over the error screen only quitting makes sense.
_MAIN_ACTIONS = frozenset({"add", "pause", "step", "abort", "demo", "filter", "help", "quit"})
# Keys that need a live engine: dimmed while it starts and after it failed or stopped.
_ENGINE_ACTIONS = frozenset({"add", "pause", "step", "abort", "demo"})
_NO_ENGINE = frozenset({EngineState.STARTING, EngineState.ERROR, EngineState.STOPPED})
_READ_ONLY = "This is a replay: adding and aborting requests is disabled."


class StepviewApp(App[None]):
    """Watch an engine step by step; keyboard-driven, usable at 80x24."""

    CSS_PATH = "stepview.tcss"
    TITLE = "stepview"
    # Every key is in the footer and on the help screen; the palette would only take space.
    ENABLE_COMMAND_PALETTE = False
    POLL_HZ: ClassVar[float] = 15.0
    """How often ``source.latest()`` is pulled; above ~15 Hz the terminal, not the engine,
    becomes the bottleneck over ssh."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "add", "Add", tooltip="Add a prompt (form with presets)"),
        Binding("p", "pause", "Pause", tooltip="Pause or resume stepping"),
        Binding("s", "step", "Step", tooltip="Run one step (while paused)"),
        Binding("x", "abort", "Abort", tooltip="Abort the selected request"),
        Binding("d", "demo", "Demo", tooltip="Queue the seed example's three prompts"),
        Binding(
            "slash",
            "filter",
            "Filter",
            key_display="/",
            tooltip="Filter by text, or by is:STATE (is:aborted, is:length)",
        ),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="This help"),
        Binding("q", "quit", "Quit", tooltip="Stop the engine and quit"),
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
    ]

    def __init__(
        self,
        source: SnapshotSource,
        *,
        replay: bool = False,
        clock: Callable[[], float] | None = time.monotonic,
    ) -> None:
        """``clock`` only extends the start-up timer between snapshots; ``None`` for tests."""
        super().__init__()
        self.source = source
        self.replay = replay
        self.clock = clock
        self._pulled_at = 0.0
        self.shown: StepSnapshot | None = None
        """The snapshot on screen: everything drawn is computed from it, and only from it."""
        self._pulled: StepSnapshot | None = None
        self._next_id = 1
        self._quitting = False
        self._error_reported = ""
        self._filter = RequestFilter()
        self._focus_before_filter: RequestTable | None = None
        self.theme = "ansi-dark"

    # -- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusBar(replay=self.replay, id="status")
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
        """Pull the newest snapshot; cheap and does nothing when the source has not moved."""
        latest = self.source.latest()
        if latest is self._pulled:
            if latest.engine_state is EngineState.STARTING and self.clock is not None:
                self._loading.show(latest, self.clock() - self._pulled_at)
            return
        self._pulled = latest
        self._pulled_at = self.clock() if self.clock is not None else 0.0
        self.show_snapshot(latest)

    def show_snapshot(self, snapshot: StepSnapshot) -> None:
        """Make ``snapshot`` the one on screen, updating only what it changed."""
        previous, self.shown = self.shown, snapshot
        self._status.show(snapshot)
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

    def _show_requests(self, snapshot: StepSnapshot) -> None:
        pending: list[RequestView] = []
        running: list[RequestView] = []
        for view in snapshot.active:
            (running if view.state.pane == "running" else pending).append(view)
        now = snapshot.clock
        self._pending_pane.show(pending, now)
        self._running_pane.show(running, now)
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
        state = self.shown.engine_state if self.shown is not None else EngineState.STARTING
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
            if self.shown is None or self.shown.find(request_id) is None:
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
        paused = self.shown is not None and self.shown.engine_state is EngineState.PAUSED
        self.source.send(Resume() if paused else Pause())

    def action_step(self) -> None:
        self.source.send(SingleStep())

    def action_abort(self) -> None:
        if self._read_only():
            return
        view = self.current_request()
        if view is None:
            self.notify("No request selected.", severity="warning")
        elif view.state.done:
            self.notify(f"{view.request_id} is already {view.state.value}.", severity="warning")
        else:
            self.source.send(Abort(view.request_id))
            self.notify(f"abort sent for {view.request_id}", timeout=2)

    @on(RequestTable.Chosen)
    def _open_detail(self, event: RequestTable.Chosen) -> None:
        if self.shown is not None:
            self.push_screen(DetailScreen(event.view.request_id, self.shown))

    def action_help(self) -> None:
        self.push_screen(
            HelpScreen(
                [
                    ("Engine and requests", self.BINDINGS),
                    ("In a pane", RequestTable.BINDINGS),
                    ("In the detail view", DetailScreen.BINDINGS),
                    ("In the add-prompt form", PromptForm.BINDINGS),
                ],
                notes=[
                    "Pending: waiting for the engine, or preempted (KV cache freed).",
                    "Running: prefill x/y tokens computed, then decoding.",
                    "Latency: queued = arrival to scheduled, ttft = arrival to first token.",
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
        await asyncio.to_thread(self.source.stop, 5.0)
        self.exit()

    def on_unmount(self) -> None:
        # Exited another way (app.exit() from a signal handler, an exception): do not leave
        # the producer thread behind.
        if self.source.alive:
            self.source.stop(timeout=5.0)
