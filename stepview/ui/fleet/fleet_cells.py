"""A fleet row as the fleet screen's table cells: the server (its mark, address and labels),
its state and figures, and its data-parallel ranks' rows.

Every cell is a :class:`~rich.text.Text`, never a ``str``: the table reads a ``str`` as
markup, and a model name or a label is another party's text (``[/x]`` in one ended the
screen); a Text is also drawn without being parsed. Cells are made once per text and kept:
at a thousand servers, making nine a row twice a second was most of the screen's work.
"""

from __future__ import annotations

import functools

from rich.cells import cell_len
from rich.text import Text

from stepview.insight.fleet import BUSIEST, IDLEST, FleetRow, shown_labels
from stepview.model.snapshot import RankStatus
from stepview.model.targets import Labels
from stepview.ui.display import one_line, percent, rate_value, seconds
from stepview.ui.plain import literal

WAITING_WIDTH = 26
MARKS = {BUSIEST: ("▲", "bold red"), IDLEST: ("▼", "bold green")}
STATE_STYLES = {
    "running": "bold green",
    "idle": "dim",
    "down": "bold red",
    "not vLLM": "bold yellow",
}
LABELS_WIDTH = 32
"""The labels' line under an address is cut (…) past this width, or the address's if wider."""
SERVER_CELLS = 4096
"""Server cells (address, labels, mark) kept drawn: more than a fleet of a thousand shows."""

FIGURE_CELLS = 8192
"""Figure cells kept made, by their text (:func:`_text`)."""

Cells = tuple[Text, ...]
"""One table row's cells (see the module docstring)."""


def width(value: object) -> int:
    """The cells ``value`` takes on screen (its widest line)."""
    text = value.plain if isinstance(value, Text) else str(value)
    return max(cell_len(line) for line in text.split("\n"))


def server_cells(row: FleetRow) -> Cells:
    reasons = ", ".join(f"{reason} {count}" for reason, count in row.waiting_by_reason if count)
    waiting = f"{row.waiting} ({reasons})" if reasons else str(row.waiting)
    if len(waiting) > WAITING_WIDTH:  # so that the row fits 120 columns
        waiting = waiting[: WAITING_WIDTH - 1] + "…"
    return (
        _server_cell(row.address, row.labels, row.mark),
        _text(row.state, STATE_STYLES.get(row.state, "")),
        _text(row.model or "-"),  # the server's text: literal() makes it safe
        _text(str(row.running)),
        _text(waiting),
        _text(percent(row.kv_cache_usage)),
        _text(rate_value(row.tokens_per_s)),
        _text(seconds(row.ttft_p50)),
        _text(seconds(row.ttft_p99)),
        _text("-" if row.preemptions_per_min is None else f"{row.preemptions_per_min:.1f}"),
    )


_text = functools.lru_cache(maxsize=FIGURE_CELLS)(literal)
"""A figure's cell, made once for each text: a fleet's figures repeat (``0``, ``-``,
``running``, ``12%``), and a Text is not cheap to make (rich strips control codes from each):
nine a row were most of a poll of a thousand servers. Never changed once made."""


@functools.lru_cache(maxsize=SERVER_CELLS)
def _server_cell(address: str, labels: Labels, mark: str) -> Text:
    """The server's cell: its mark, its address, and its labels on a second, dim line. The
    same for a server poll after poll, so made once (the labels' text is most of a row's
    work: a thousand rows took 90 ms a poll)."""
    symbol, style = MARKS.get(mark, ("", ""))
    # The address and labels come from a listing or the server: another party's text.
    server = Text.assemble((symbol or " ", style), " ", one_line(address))
    shown = one_line(shown_labels(FleetRow(address, "", labels=labels)))
    if shown:
        width = max(len(address), LABELS_WIDTH)
        if len(shown) > width:
            shown = shown[: width - 1] + "…"
        server.append(f"\n  {shown}", "dim")
    return server


def rank_cells(rank: RankStatus) -> Cells:
    """A data-parallel rank's row, under its server's."""
    state = Text("up", "green") if rank.connected else Text("down", "bold red")
    figures = (str(rank.running), str(rank.waiting), percent(rank.kv_cache_usage))
    return (
        Text(f"  └ rank {rank.rank}"), state, Text(""), *map(Text, figures),
        *(Text("") for _ in range(4)),
    )  # fmt: skip
