"""What one row of a request pane says: the columns, their widths, and each cell's text.

Kept apart from :mod:`stepview.ui.main.request_table`, the widget, which decides *when* a row
is drawn (only rows on screen, a strip cached while the request's view is the same object,
only lines that changed repainted): this decides *what* a row and the header line show for a
pane width, as Rich text, and knows nothing of scrolling, the cursor or the cache. Styles come
by name from the widget (its component classes follow the theme).
"""

from __future__ import annotations

from collections.abc import Callable

from rich.cells import cell_len, set_cell_size
from rich.control import strip_control_codes
from rich.style import Style
from rich.text import Span, Text

from stepview.model.chat import headline
from stepview.model.scheduling import WaitReason
from stepview.model.snapshot import RequestState, RequestView
from stepview.ui.display import id_cell, latency_cell, one_line, state_cell

# Characters of a prompt a row ever looks at (the cell is never wider).
_PROMPT_PREVIEW = 300
_PANE_STYLES = {"pending": "waiting", "running": "active"}  # a state's style by pane
_BAD_STATES = frozenset({RequestState.ABORTED, RequestState.REJECTED})

StyleOf = Callable[[str], Style]
"""A style by its name (``id``, ``dim``, ``failed``...): the widget's component classes."""


class Columns:
    """Column widths for a pane width: the prompt takes what the others leave."""

    __slots__ = ("id", "latency", "params", "prompt", "state", "width")

    def __init__(self, width: int) -> None:
        self.width = width
        wide = width >= 110
        # Whole ids at 90 columns: load1-12 and a server's 8 hex digits (longer: the end).
        self.id = 10 if wide else 8 if width >= 90 else 6
        self.params = 18 if wide else 13
        # Room for why a request waits, and behind whom: "waiting·behind load1-12".
        self.state = 26 if wide else 23 if width >= 90 else 17
        self.latency = 24 if wide else 21
        rest = width - self.id - self.params - self.state - self.latency - 4
        if rest < 12:  # very narrow: the prompt matters more than the latency
            self.latency = 0
            rest = width - self.id - self.params - self.state - 3
        self.prompt = max(0, rest)

    def cells(self) -> list[tuple[str, int]]:
        return [
            ("id", self.id),
            ("prompt", self.prompt),
            ("params", self.params),
            ("state", self.state),
            ("latency", self.latency),
        ]


def header_text(width: int, style: Style) -> Text:
    """The header line: each column's name over its cells."""
    text = Text(no_wrap=True, end="")
    for name, size in Columns(width).cells():
        if size:
            text.append(name.ljust(size)[:size] + " ", style)
    text.truncate(width, pad=True)
    return text


def row_text(
    view: RequestView, width: int, now: float, reason: WaitReason | None, style_of: StyleOf
) -> Text:
    """The row of ``view`` as of the snapshot clock ``now`` (``reason``: why it waits, its own
    or its queue's), without the cursor's styling."""
    cols = Columns(width)
    state = view.state
    if state in _BAD_STATES:
        state_style = style_of("failed")
    else:
        state_style = style_of(_PANE_STYLES.get(state.pane, "dim"))
    prompt = one_line(headline(view.prompt, view.messages), _PROMPT_PREVIEW)
    if view.lineage is not None:  # a clone's prompt is its parent's: say whose
        prompt = f"{one_line(view.lineage.label(), 40)} · {prompt}"
    cells: list[tuple[str, int, Style | str]] = [
        (id_cell(view.request_id, cols.id), cols.id, style_of("id")),
        (prompt, cols.prompt, ""),
        (view.spec.summary(), cols.params, style_of("dim")),
        (state_cell(view, cols.state, reason), cols.state, state_style),
        (latency_cell(view, now), cols.latency, style_of("dim")),
    ]
    return _joined(cells, width)


def _fitted(value: str, size: int) -> str:
    """``value`` as a cell of exactly ``size`` terminal cells: what Rich's ``Text(value)``
    then ``truncate(size, overflow="ellipsis", pad=True)`` leaves of it (control codes
    dropped, cut with ``…``, padded with spaces)."""
    plain = strip_control_codes(value)
    length = cell_len(plain)
    if length > size:
        return set_cell_size(plain, size - 1) + "…"
    return plain + " " * (size - length)


def _joined(cells: list[tuple[str, int, Style | str]], width: int) -> Text:
    """The cells side by side, each followed by a gap in its own style, fitted to ``width``.

    The same text and spans as appending each cell as a ``Text`` and truncating the row, made
    in one piece: a row's cells were most of its cost (a pane redraws a screen of rows per
    snapshot), and the row's last gap, one cell past ``width``, made Rich measure the whole
    row grapheme by grapheme to cut it.
    """
    parts: list[str] = []
    spans: list[Span] = []
    end = 0  # characters so far
    for value, size, style in cells:
        if not size:
            continue
        # The gap after a cell takes the cell's style: a plain gap would join the next
        # plain cell into one run starting with a space, which librsvg-drawn screenshots
        # drop ("decoding 12 tokttft 100ms").
        cell = _fitted(value, size) + " "
        if style:
            spans.append(Span(end, end + len(cell), style))
        parts.append(cell)
        end += len(cell)
    plain = "".join(parts)
    if plain and cell_len(plain[:-1]) == width:  # Rich would cut the last gap alone: drop it
        plain = plain[:-1]
        if spans and spans[-1].end > len(plain):
            spans[-1] = Span(spans[-1].start, len(plain), spans[-1].style)
    text = Text(plain, no_wrap=True, end="", spans=spans)
    text.truncate(width, pad=True)  # narrower than the cells, or wider: as Rich cuts and pads
    return text
