"""The fleet screen: one row per watched server (and per data-parallel rank), live.

Every server has its own snapshot source (a ``/metrics`` watch or a plug-in driver) on its own
thread; a timer here pulls each one's latest immutable snapshot, as the single-server app does,
and redraws the table from the rows :mod:`stepview.insight.fleet` reads off them (the figures
and the busiest/idlest rule live there, not here). Enter ends this app with the chosen
server's index: the launcher then shows that server's full view, and Esc there comes back
(:mod:`stepview.ui.fleet.server_app`). The sources are the launcher's: they run on while
either app is on screen, so the window of each stays whole.

The servers are a :class:`~stepview.model.targets.Roster`, read on each poll like the
snapshots: a fleet found where it is listed (a file_sd file, a Prometheus server) grows and
shrinks while on screen, and the table follows (rebuilt only when its rows change, the cursor
kept on its server). A server listed with labels has them on a second, dim line of its cell,
so the table is no wider at 80 columns; a listing that cannot be read is said on a line of its
own above the table, and servers joining or leaving in a notification.

At tens of servers the table is taller than the terminal: ``s`` sorts it by a column (the
figures that say a server is loaded or slow, worst first) and ``/`` narrows it to the servers
whose address or labels hold some text (:mod:`stepview.insight.fleet_order` decides both; the
title line says which sort and filter are on). The busiest/idlest marks stay the whole fleet's:
a filter hides rows, it does not change which server is busiest. The cursor follows its server
wherever a sort, a filter or a refresh moves it, so Enter opens the server the user chose.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Footer, Input, Static

from stepview.insight.fleet import (
    KV_SPREAD,
    WAITING_SPREAD,
    FleetRow,
    fleet_row,
    mark_imbalance,
)
from stepview.insight.fleet_order import LISTED, matching, next_sort, ordered
from stepview.model.snapshot import StepSnapshot
from stepview.model.source import SnapshotSource
from stepview.model.targets import FixedRoster, Labels, Member, Roster
from stepview.ui.fleet.fleet_cells import Cells, rank_cells, server_cells, width
from stepview.ui.main.filter_bar import FilterBar
from stepview.ui.plain import PlainStatic, PlainTextApp
from stepview.ui.terminal_driver import driver_class
from stepview.ui.theme import THEME

COLUMNS = (
    *("server", "state", "model", "run", "waiting (why)", "KV", "tok/s"),
    *("TTFT p50", "TTFT p99", "pre/min"),
)
NO_SERVER = "no server to watch yet: those listed join as they appear"
NOTICES_SHOWN = 3
"""Changes of the fleet notified at once; more (a listing of 64 read at start) are counted."""
RULE = (
    f"▲ busiest ▼ idlest: marked when the servers up differ by {WAITING_SPREAD}+ waiting "
    f"or {KV_SPREAD:.0%}+ KV use"
)
FILTER_PLACEHOLDER = "address or label text (gpu-1, zone=b, :8001); enter keeps, esc clears"


class FleetApp(PlainTextApp[str | None]):
    """The servers of ``members`` (a roster, or fixed (address, source) pairs; the sources
    started by the caller), as a table; ends with the address chosen (Enter), or ``None``.
    ``cursor`` and ``sort``: the server and the order to start on (the launcher's, after a
    server's view: Esc there comes back to the fleet as the user left it)."""

    TITLE = "stepview fleet"
    ENABLE_COMMAND_PALETTE = False
    POLL_HZ: ClassVar[float] = 2.0
    """Fleet figures are per window, not per step: twice a second is plenty."""
    BINDINGS: ClassVar[list[BindingType]] = [
        # Priority: the table, which has the focus, binds these keys too, out of the footer.
        Binding("enter", "open", "Open server", priority=True),
        Binding("left", "columns('left')", "Columns", key_display="←→", priority=True),
        Binding("right", "columns('right')", "Columns", show=False, priority=True),
        Binding("home", "ends('top')", "First", show=False, priority=True),
        Binding("end", "ends('bottom')", "Last", show=False, priority=True),
        Binding("s", "sort", "Sort"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("escape", "clear_filter", "Clear filter"),
        Binding("q", "quit", "Quit"),
    ]
    DEFAULT_CSS = """
    #fleet-title { height: 1; background: $panel; padding: 0 1; }
    #fleet-problem { height: auto; color: $warning; padding: 0 1; }
    #fleet-rule { height: 1; color: $text-muted; padding: 0 1; }
    #fleet-filter { display: none; }
    #fleet-filter.-shown { display: block; }
    DataTable { height: 1fr; }
    """

    def __init__(
        self,
        members: Roster | Sequence[tuple[str, SnapshotSource]],
        *,
        window: float,
        cursor: str | None = None,
        sort: str = LISTED,
    ) -> None:
        super().__init__(driver_class=driver_class(), ansi_color=True)
        self.roster = FixedRoster(members) if isinstance(members, Sequence) else members
        self.window = window
        self.fleet: list[FleetRow] = []
        """Every server's row as last polled, in the roster's order, marks included."""
        self.rows: list[FleetRow] = []
        """The rows on screen, sorted and filtered: everything drawn comes from them."""
        self.sort = sort
        """The order of the rows (:data:`~stepview.insight.fleet_order.SORTS`), ``s`` cycles it."""
        self.filter = ""
        """The text the shown servers' address or labels hold (``/``); ``""``: all shown."""
        self._cursor = cursor  # the server to put the cursor on, once it has a row
        self._owners: list[str] = []  # table row -> the address of its server
        self._layout: tuple[tuple[str, int], ...] = ()  # each table row's server and height
        self._cells: list[Cells] = []  # each table row's cells: the very objects it holds
        self._polled: dict[str, tuple[StepSnapshot, Labels, FleetRow]] = {}  # by address
        # Each shown server's row and its cells, by address: a sort, a filter or a server
        # that did not change draws no cell again (nine Texts a row, 50 µs).
        self._drawn: dict[str, tuple[FleetRow, Cells]] = {}
        # Made here, not looked up on mount: the footer asks check_action before the mount.
        self._bar = FilterBar(id="fleet-filter", placeholder=FILTER_PLACEHOLDER)
        self.theme = THEME

    def compose(self) -> ComposeResult:
        yield PlainStatic(id="fleet-title")
        yield PlainStatic(id="fleet-problem")
        yield DataTable(cursor_type="row", zebra_stripes=True)
        yield Static(RULE, id="fleet-rule")
        yield self._bar
        yield Footer()

    def on_mount(self) -> None:
        # Held, not queried on each poll: a poll the timer runs while the app is being taken
        # down (Enter, q) would find them gone.
        self._table = self.query_one(DataTable)
        self._title = self.query_one("#fleet-title", Static)
        self._problem = self.query_one("#fleet-problem", Static)
        self._server_column = self._table.add_columns(*COLUMNS)[0]
        self.poll()
        self.set_interval(1 / self.POLL_HZ, self.poll)
        self._table.focus()

    def poll(self) -> None:
        """Read the members and each one's latest snapshot and redraw the table (tens of
        rows); say what changed in the fleet."""
        lines = self.roster.notices()
        if len(lines) > NOTICES_SHOWN:
            more = len(lines) - NOTICES_SHOWN + 1
            lines = [*lines[: NOTICES_SHOWN - 1], f"and {more} more changes (the log has each)"]
        for line in lines:
            self.notify(line, timeout=8)
        members = self.roster.members()
        polled = self._polled
        self._polled = {}
        self.fleet = mark_imbalance([self._row(member, polled) for member in members])
        problems = self.roster.problems() or (() if members else (NO_SERVER,))
        self._problem.update("\n".join(problems))
        self._problem.display = bool(problems)
        self._show()

    def _row(
        self, member: Member, polled: dict[str, tuple[StepSnapshot, Labels, FleetRow]]
    ) -> FleetRow:
        """``member``'s row: the one of the last poll while its source still gives the same
        snapshot (a fleet of a thousand has hundreds of servers down, hung or idle, whose
        rows were worked out again twice a second)."""
        snapshot = member.source.latest()
        kept = polled.get(member.address)
        if kept is not None and kept[0] is snapshot and kept[1] == member.labels:
            row = kept[2]
        else:
            row = fleet_row(member.address, snapshot, self.window, member.labels)
        self._polled[member.address] = (snapshot, member.labels, row)
        return row

    def _show(self) -> None:
        """Draw the polled rows in the chosen order and filter (again after ``s`` or ``/``,
        without waiting for the next poll)."""
        self.rows = matching(ordered(self.fleet, self.sort), self.filter)
        self._title.update(self._title_line())
        cells: list[Cells] = []
        layout: list[tuple[str, int]] = []
        drawn, self._drawn = self._drawn, {}
        for row in self.rows:
            kept = drawn.get(row.address)
            server = kept[1] if kept is not None and kept[0] == row else server_cells(row)
            self._drawn[row.address] = (row, server)
            cells.append(server)
            layout.append((row.address, 2 if "\n" in server[0].plain else 1))
            for rank in row.ranks:
                cells.append(rank_cells(rank))
                layout.append((row.address, 1))
        self._owners = [address for address, _ in layout]
        if tuple(layout) == self._layout:
            self._update(cells)
        elif Counter(layout) == Counter(self._layout):
            self._reorder(cells, tuple(layout))
        else:
            self._rebuild(cells, tuple(layout))

    def _update(self, cells: list[Cells]) -> None:
        """The same rows: new figures in place. Rebuilding (clear) would also put the table
        back at its left edge twice a second, out of reach of a narrow terminal that
        scrolled right (with the arrow keys) to see the last columns.

        Only the cells that changed are set, and a column is measured again only for a cell
        wider than it: the table re-measures a whole column for each cell set narrower than
        the column (every cell but the widest), which at 64 servers was a second of CPU per
        poll. So a column widens as soon as a figure needs it and never narrows while the
        rows stay the same (no table jumping sideways as figures come and go)."""
        table = self._table
        columns = table.ordered_columns
        held: list[Cells] = []
        for number, (values, before) in enumerate(zip(cells, self._cells, strict=True)):
            row: list[Text] = []
            for column, (value, was) in enumerate(zip(values, before, strict=True)):
                if value is was or value == was:
                    row.append(was)  # the table holds this one (see _reorder)
                    continue
                wider = width(value) > columns[column].content_width
                table.update_cell_at(Coordinate(number, column), value, update_width=wider)
                row.append(value)
            held.append(tuple(row))
        self._cells = held

    def _reorder(self, cells: list[Cells], layout: tuple[tuple[str, int], ...]) -> None:
        """The same rows in another order (``s``, or a refresh under a sort by a figure): the
        table's rows moved where they go, then their new figures set. Rebuilding measured
        every cell of every row again: 0.44 s at 1 000 servers on an idle core, seconds
        beside the watches' threads. The table sorts by a key of a row's values, so each row
        is known by its first cell, the very object it holds (:attr:`_cells`)."""
        table = self._table
        under = self._under_cursor()
        goes = {block: index for index, block in enumerate(_blocks(layout))}
        place = {
            id(held[0]): goes[block]
            for held, block in zip(self._cells, _blocks(self._layout), strict=True)
        }
        table.sort(self._server_column, key=lambda first: place[id(first)])
        moved = sorted(self._cells, key=lambda held: place[id(held[0])])
        self._cells, self._layout = moved, layout
        self._update(cells)
        self._put_cursor(under)

    def _under_cursor(self) -> str | None:
        """The server the cursor is on (one of its rows), before the rows change."""
        row = self._table.cursor_row
        return self._layout[row][0] if self._layout and 0 <= row < len(self._layout) else None

    def _put_cursor(self, server: str | None) -> None:
        """The cursor on ``server``'s first row, where it is now; kept where it was if gone."""
        table = self._table
        if not table.row_count:
            return
        row = table.cursor_row
        if server is not None and server in self._owners:
            row = self._owners.index(server)
        table.move_cursor(row=min(max(row, 0), table.row_count - 1))

    def _title_line(self) -> str:
        """How many servers, up, shown (a filter on), in which order: first, so that a
        narrow terminal still sees them."""
        up = sum(row.up for row in self.fleet)
        line = f"stepview fleet · {len(self.fleet)} servers, {up} up"
        if self.filter:
            line += f" · {len(self.rows)} match “{self.filter}”"
        if self.sort != LISTED:
            line += f" · by {self.sort}"
        return f"{line} · figures over the last {self.window:g} s · Enter: a server's full view"

    def _rebuild(self, cells: list[Cells], layout: tuple[tuple[str, int], ...]) -> None:
        """Servers joined or left, or a filter changed which are shown: the table anew, the
        cursor on the server it was on."""
        table = self._table
        under = self._under_cursor()
        if under is not None:
            self._cursor = under
        scrolled = table.scroll_x  # clear() puts it back at the left edge: keep where it was
        table.clear()
        for values, (_, height) in zip(cells, layout, strict=True):
            table.add_row(*values, height=height)
        self._layout, self._cells = layout, cells
        self._put_cursor(self._cursor)
        if scrolled and table.row_count:  # once the new rows have their widths
            self.call_after_refresh(table.scroll_to, x=scrolled, animate=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While the filter bar has the focus, Enter and the arrows are its own (keep the
        filter, move in the text); Esc clears a filter only when there is one."""
        if action in ("open", "columns", "ends") and self.focused is self._bar:
            return False
        if action == "clear_filter":
            return bool(self.filter) or self._bar.has_class("-shown")
        return True

    def action_sort(self) -> None:
        """The next sort of :data:`~stepview.insight.fleet_order.SORTS`, drawn at once."""
        self.sort = next_sort(self.sort)
        self._show()

    def action_filter(self) -> None:
        """``/``: the filter bar, shown and focused, its text applied as it is typed."""
        self._bar.add_class("-shown")
        self._bar.focus()

    def action_clear_filter(self) -> None:
        """Esc: every server again (the cursor stays on its server)."""
        self._bar.clear()
        self._filter_cleared()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input is self._bar and event.value != self.filter:
            self.filter = event.value
            self._show()
            self.refresh_bindings()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the bar: the filter kept (the bar too, to show it), the table focused."""
        if event.input is self._bar:
            self._bar.set_class(bool(self.filter), "-shown")
            self._table.focus()

    def on_filter_bar_cleared(self, event: FilterBar.Cleared) -> None:
        self._filter_cleared()

    def _filter_cleared(self) -> None:
        self._bar.remove_class("-shown")
        self._table.focus()
        if self.filter:
            self.filter = ""
            self._show()
        self.refresh_bindings()

    def action_open(self) -> None:
        """Leave with the server under the cursor (its rank rows open it too)."""
        if self._owners:
            self.exit(self._owners[self._table.cursor_row])

    def action_columns(self, way: str) -> None:
        """Scroll the columns sideways: a terminal narrower than the table sees the rest."""
        if way == "left":
            self._table.action_scroll_left()
        else:
            self._table.action_scroll_right()

    def action_ends(self, which: str) -> None:
        """The first or the last row: after a sort the server the cursor stays on may be far
        from the worst one, which is first."""
        if which == "top":
            self._table.action_scroll_top()
        else:
            self._table.action_scroll_bottom()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    async def action_quit(self) -> None:
        self.exit(None)


def _blocks(layout: tuple[tuple[str, int], ...]) -> list[tuple[str, int]]:
    """Each table row as (its server, which of the server's rows): a server's own row is 0,
    its ranks' rows 1, 2, … — the same row in any order of the servers."""
    seen: Counter[str] = Counter()
    blocks = []
    for address, _ in layout:
        blocks.append((address, seen[address]))
        seen[address] += 1
    return blocks
