"""The three request panes (Pending, Running, Finished) and the filter bar under them.

Kept apart from :mod:`stepview.ui.app` because the panes and their filter are one thing the app
only feeds and asks: the app gives them each snapshot it shows and opens the filter on ``/``;
which pane gets which rows, the newcomer's hint in an empty Pending pane, one filter applied
to all three and where the focus goes back to when the filter is kept or cleared are decided
here, with the widgets they concern.
"""

from __future__ import annotations

from itertools import compress
from operator import attrgetter

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Input

from stepview.model.snapshot import RequestState, StepSnapshot
from stepview.ui.bindings import NEWCOMER_HINT
from stepview.ui.main.chunk_filter import ChunkFilter, Select
from stepview.ui.main.filter_bar import FilterBar
from stepview.ui.main.filtering import RequestFilter
from stepview.ui.main.request_table import RequestTable

_STATE = attrgetter("state")


def _in_pane(name: str) -> Select:
    """The views that :meth:`StepSnapshot.pane` gives pane ``name``, picked in C (a test
    of each view's state)."""
    states = frozenset(state for state in RequestState if state.pane == name)
    return lambda views: compress(views, map(states.__contains__, map(_STATE, views)))


class RequestPanes(Vertical):
    """The panes of one snapshot's requests, filtered alike."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # Made here, not looked up on mount: the app shows its first snapshot from its own
        # on_mount, which may come first.
        self.pending = RequestTable("Pending", id="pending")
        self.running = RequestTable("Running", id="running")
        self.finished = RequestTable("Finished", id="finished", append_only=True)
        self._bar = FilterBar(id="filter")
        # Which active request goes in which pane, at the cost of what each snapshot changed.
        self._pane_rows = ChunkFilter(_in_pane("pending"), _in_pane("running"))
        self._filter = RequestFilter()
        self._focus_before_filter: RequestTable | None = None

    def compose(self) -> ComposeResult:
        yield self.pending
        yield self.running
        yield self.finished
        yield self._bar

    def show(self, snapshot: StepSnapshot, accepts_requests: bool) -> None:
        """The snapshot's requests in their panes (as of its clock); a source that takes
        requests and has none yet says how to add one."""
        now = snapshot.clock
        # What snapshot.pane gives, without a pass over 100 000 waiting requests per redraw.
        pending, running = self._pane_rows.apply(snapshot.active)
        self.pending.show(pending, now, snapshot.queue_reasons)
        self.running.show(running, now)
        empty = accepts_requests and not snapshot.active and not snapshot.finished
        self.pending.set_empty_text(NEWCOMER_HINT if empty else "none")
        # The Frozen view itself, never a copy: the pane reads only the rows on screen.
        self.finished.show(snapshot.pane("finished"), now)

    def open_filter(self, focused: Widget | None) -> None:
        """``/``: the filter bar, shown and focused; the pane ``focused`` gets the focus back."""
        if isinstance(focused, RequestTable):
            self._focus_before_filter = focused
        self._bar.add_class("-shown")
        self._bar.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._filter = RequestFilter.parse(event.value)
        for table in (self.pending, self.running, self.finished):
            table.set_filter(self._filter)

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        """Enter: keep the filter (and the bar, to show it) and go back to the panes."""
        self._bar.set_class(self._filter.active, "-shown")
        (self._focus_before_filter or self.finished).focus()

    @on(FilterBar.Cleared)
    def _filter_cleared(self) -> None:
        self._bar.remove_class("-shown")
        (self._focus_before_filter or self.finished).focus()
