"""The fleet screen: one row per watched server (and per data-parallel rank), live.

Every server has its own snapshot source (a ``/metrics`` watch or a plug-in driver) on its own
thread; a timer here pulls each one's latest immutable snapshot, as the single-server app does,
and redraws the table from the rows :mod:`stepview.insight.fleet` reads off them (the figures
and the busiest/idlest rule live there, not here). Enter ends this app with the chosen
server's index: the launcher then shows that server's full view, and Esc there comes back
(:mod:`stepview.ui.fleet.server_app`). The sources are the launcher's: they run on while
either app is on screen, so the window of each stays whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Footer, Static

from stepview.insight.fleet import (
    BUSIEST,
    IDLEST,
    KV_SPREAD,
    WAITING_SPREAD,
    FleetRow,
    fleet_row,
    mark_imbalance,
)
from stepview.model.source import SnapshotSource
from stepview.ui.display import percent, rate_value, seconds
from stepview.ui.terminal_driver import driver_class
from stepview.ui.theme import THEME

COLUMNS = (
    *("server", "state", "model", "run", "waiting (why)", "KV", "tok/s"),
    *("TTFT p50", "TTFT p99", "pre/min"),
)
WAITING_WIDTH = 26
MARKS = {BUSIEST: ("▲", "bold red"), IDLEST: ("▼", "bold green")}
STATE_STYLES = {
    "running": "bold green",
    "idle": "dim",
    "down": "bold red",
    "not vLLM": "bold yellow",
}
RULE = (
    f"▲ busiest ▼ idlest: marked when the servers up differ by {WAITING_SPREAD}+ waiting "
    f"or {KV_SPREAD:.0%}+ KV use"
)


class FleetApp(App[int | None]):
    """The servers at ``members`` (address, source: started by the caller), as a table."""

    TITLE = "stepview fleet"
    ENABLE_COMMAND_PALETTE = False
    POLL_HZ: ClassVar[float] = 2.0
    """Fleet figures are per window, not per step: twice a second is plenty."""
    BINDINGS: ClassVar[list[BindingType]] = [
        # Priority: the table, which has the focus, binds these keys too, out of the footer.
        Binding("enter", "open", "Open server", priority=True),
        Binding("left", "columns('left')", "Columns", key_display="←→", priority=True),
        Binding("right", "columns('right')", "Columns", show=False, priority=True),
        Binding("q", "quit", "Quit"),
    ]
    DEFAULT_CSS = """
    #fleet-title { height: 1; background: $panel; padding: 0 1; }
    #fleet-rule { height: 1; color: $text-muted; padding: 0 1; }
    DataTable { height: 1fr; }
    """

    def __init__(
        self,
        members: Sequence[tuple[str, SnapshotSource]],
        *,
        window: float,
        cursor: int = 0,
    ) -> None:
        super().__init__(driver_class=driver_class(), ansi_color=True)
        self.members = list(members)
        self.window = window
        self.rows: list[FleetRow] = []
        """The rows on screen, marks included: everything drawn comes from them."""
        self._cursor = cursor
        self._owners: list[int] = []  # table row -> index of its server in ``members``
        self.theme = THEME

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-title")
        yield DataTable(cursor_type="row", zebra_stripes=True)
        yield Static(RULE, id="fleet-rule")
        yield Footer()

    def on_mount(self) -> None:
        self._table = self.query_one(DataTable)
        self._table.add_columns(*COLUMNS)
        self.poll()
        if self._owners:
            server = min(self._cursor, len(self.members) - 1)
            self._table.move_cursor(row=self._owners.index(server))
        self.set_interval(1 / self.POLL_HZ, self.poll)
        self._table.focus()

    def poll(self) -> None:
        """Read every server's latest snapshot and redraw the table (tens of rows)."""
        rows = [fleet_row(address, src.latest(), self.window) for address, src in self.members]
        self.rows = mark_imbalance(rows)
        up = sum(row.up for row in self.rows)
        self.query_one("#fleet-title", Static).update(
            f"stepview fleet · {len(self.rows)} servers, {up} up · "
            f"figures over the last {self.window:g} s · Enter: a server's full view"
        )
        table = self._table
        cells: list[tuple[object, ...]] = []
        owners: list[int] = []
        for index, row in enumerate(self.rows):
            cells.append(_cells(row))
            owners.append(index)
            for rank in row.ranks:
                state = Text("up", "green") if rank.connected else Text("down", "bold red")
                cells.append((
                    f"  └ rank {rank.rank}", state, "", str(rank.running),
                    str(rank.waiting), percent(rank.kv_cache_usage), "", "", "", "",
                ))  # fmt: skip
                owners.append(index)
        self._owners = owners
        if table.row_count == len(cells):
            # The same rows: new figures in place. Rebuilding (clear) would also put the
            # table back at its left edge twice a second, out of reach of a narrow terminal
            # that scrolled right (with the arrow keys) to see the last columns.
            for number, values in enumerate(cells):
                for column, value in enumerate(values):
                    table.update_cell_at(Coordinate(number, column), value, update_width=True)
            return
        cursor = table.cursor_row
        table.clear()
        for values in cells:
            table.add_row(*values)
        if table.row_count:
            table.move_cursor(row=min(cursor, table.row_count - 1))

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

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    async def action_quit(self) -> None:
        self.exit(None)


def _cells(row: FleetRow) -> tuple[object, ...]:
    symbol, style = MARKS.get(row.mark, ("", ""))
    reasons = ", ".join(f"{reason} {count}" for reason, count in row.waiting_by_reason if count)
    waiting = f"{row.waiting} ({reasons})" if reasons else str(row.waiting)
    if len(waiting) > WAITING_WIDTH:  # so that the row fits 120 columns
        waiting = waiting[: WAITING_WIDTH - 1] + "…"
    return (
        Text.assemble((symbol or " ", style), " ", row.address),
        Text(row.state, STATE_STYLES.get(row.state, "")),
        row.model or "-",
        str(row.running),
        waiting,
        percent(row.kv_cache_usage),
        rate_value(row.tokens_per_s),
        seconds(row.ttft_p50),
        seconds(row.ttft_p99),
        "-" if row.preemptions_per_min is None else f"{row.preemptions_per_min:.1f}",
    )
