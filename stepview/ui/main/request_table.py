"""One pane of requests (Pending, Running or Finished) drawn with Textual's Line API.

The Finished pane grows without bound (10 000+ requests is an ordinary benchmark), and a
DataTable pays per row on insert and per column on width changes. This widget only ever
formats the rows on screen: ``render_line`` maps a screen line to a row, formats it once
and caches the strip by request *identity*. A snapshot keeps the very same
:class:`RequestView` object for a request that did not change, so a cached row is valid
for as long as its view object is the one shown; only rows of active requests, whose
latency column counts with the snapshot clock, are redrawn every step. After each snapshot
the widget compares what every screen line would show with what it last drew and repaints
only the lines that differ, which keeps the bytes sent over ssh small. What a row says, cell
by cell, is :mod:`stepview.ui.main.request_rows`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from stepview.model.recent import Finished
from stepview.model.scheduling import WaitReason
from stepview.model.snapshot import RequestView, reason_of
from stepview.ui.main.chunk_filter import ChunkFilter
from stepview.ui.main.filtering import RequestFilter
from stepview.ui.main.request_rows import header_text, row_text

# Formatted rows kept; a few screens' worth is plenty since rows are cheap to redo.
_CACHE_ROWS = 512
# Rows either side of where the chosen request was that are read one by one to find it again.
_NEAR_ROWS = 64

# A line's identity: what it shows. Equal keys draw equal strips.
_LineKey = tuple[object, ...]


def _extends(old: Sequence[RequestView], new: Sequence[RequestView]) -> bool:
    """True when ``new`` is ``old`` with rows appended (the Finished pane between steps).

    Finished views only ever get appended, so checking the last old row is enough; a
    replay that jumps back in history fails the check and the pane recomputes.
    """
    n = len(old)
    return len(new) >= n and (n == 0 or new[n - 1] is old[n - 1])


def _matching(request_filter: RequestFilter) -> ChunkFilter:
    """The rows ``request_filter`` keeps, each chunk of a pane's rows tested once."""
    return ChunkFilter(lambda views: filter(request_filter.matches, views))


class RequestTable(ScrollView, can_focus=True):
    """A scrolling list of requests with a cursor, a header line and a filter."""

    DEFAULT_CSS = """
    RequestTable {
        overflow-x: hidden;
        scrollbar-size-vertical: 1;
        & > .request-table--header { text-style: bold; color: $text-muted; }
        & > .request-table--cursor { text-style: reverse; }
        & > .request-table--id { color: $secondary; }
        & > .request-table--dim { color: $text-muted; }
        & > .request-table--active { color: $success; }
        & > .request-table--waiting { color: $warning; }
        & > .request-table--failed { color: $error; }
        & > .request-table--empty { color: $text-muted; text-style: italic; }
    }
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "request-table--header",
        "request-table--cursor",
        "request-table--id",
        "request-table--dim",
        "request-table--active",
        "request-table--waiting",
        "request-table--failed",
        "request-table--empty",
    }

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home,g", "first", "Top", show=False),
        Binding("end,G", "last", "Bottom", show=False),
        Binding("enter", "choose", "Detail"),
    ]

    class Chosen(Message):
        """The user pressed enter (or clicked twice) on a request."""

        def __init__(self, table: RequestTable, view: RequestView) -> None:
            super().__init__()
            self.table = table
            self.view = view

    def __init__(self, title: str, *, append_only: bool = False, id: str | None = None) -> None:
        """``append_only``: rows only ever grow at the end (the Finished pane). The filter and
        the cursor are then updated for the new rows only, and a cursor on the last row
        follows the newest one."""
        super().__init__(id=id)
        self.title = title
        self.append_only = append_only
        self._rows: Sequence[RequestView] = ()
        self._now = 0.0
        self._queue_reasons: Sequence[WaitReason | None] = ()
        self._filter = RequestFilter()
        self._matching = _matching(self._filter)
        self._kept: Sequence[RequestView] | None = None  # rows passing the filter; None: all
        self._cursor = 0
        # The chosen request left the pane (finished, aborted, scheduled): nothing is selected
        # until the user moves, so a key meant for it never lands on the row that slid up.
        self._detached = False
        self._empty_text = "none"
        self._cache: dict[int, tuple[RequestView, _LineKey, Strip]] = {}
        self._drawn: dict[int, _LineKey] = {}
        self._formatted_width = -1  # the width rows were last formatted for
        self._styles: dict[str, Style] = {}
        self._pass_style: Style | None = None  # the widget's style while lines are drawn
        self.border_title = f"{title} 0"

    # -- data ------------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        """Rows shown (after the filter)."""
        return len(self._kept) if self._kept is not None else len(self._rows)

    def row(self, i: int) -> RequestView:
        return self._kept[i] if self._kept is not None else self._rows[i]

    @property
    def cursor(self) -> int:
        return self._cursor

    @property
    def selected(self) -> RequestView | None:
        """The request under the cursor, if any (none after the chosen one left the pane)."""
        if 0 <= self._cursor < self.row_count and not self._detached:
            return self.row(self._cursor)
        return None

    def show(
        self,
        rows: Sequence[RequestView],
        now: float,
        queue_reasons: Sequence[WaitReason | None] = (),
    ) -> None:
        """Show ``rows`` as of the snapshot clock ``now`` (``queue_reasons``: what the
        waiting requests without a reason of their own wait for); repaints only lines that
        changed."""
        if rows is self._rows and now == self._now and queue_reasons == self._queue_reasons:
            return
        self._queue_reasons = queue_reasons
        old_rows, old_count = self._rows, self.row_count
        selected = self.selected
        at_end = self._cursor >= old_count - 1
        appended = self.append_only and _extends(old_rows, rows)
        self._rows, self._now = rows, now
        if appended and isinstance(self._kept, list):  # the Finished pane's, never chunked
            match = self._filter.matches
            self._kept.extend(rows[i] for i in range(len(old_rows), len(rows)) if match(rows[i]))
        else:
            self._rebuild_index()
        count = self.row_count
        if appended:
            if at_end:
                self._cursor = count - 1
        elif selected is not None:
            found = self._find(selected.request_id, fallback=-1, near=self._cursor)
            if found < 0:
                self._detached = True  # the cursor stays put, selecting nothing
            else:
                self._cursor = found
        self._cursor = max(0, min(self._cursor, count - 1))
        if count != old_count or len(rows) != len(old_rows):
            self._sync_size()
        self._repaint_changed()

    def set_empty_text(self, text: str) -> None:
        """What the pane says when it has no request ("none", or a hint for a newcomer)."""
        if text != self._empty_text:
            self._empty_text = text
            self._repaint_changed()

    def set_filter(self, request_filter: RequestFilter) -> None:
        """Show only rows matching ``request_filter``; keeps the selected request if it passes."""
        selected = self.selected
        self._filter = request_filter
        self._matching = _matching(request_filter)
        self._rebuild_index()
        self._cursor = self._find(selected.request_id, 0) if selected else 0
        if self.append_only and selected is None:
            self._cursor = max(0, self.row_count - 1)
        self._sync_size()
        self.refresh()

    def _rebuild_index(self) -> None:
        self._kept = self._matching.apply(self._rows)[0] if self._filter.active else None

    def _find(self, request_id: str, fallback: int, near: int = 0) -> int:
        """The row of ``request_id``, else ``fallback``. Looked for first within a screen of
        row ``near`` (where it was: between two snapshots rows move by the few that came or
        went), then in one pass over every row: a pane of 100 000 rows, read row by row from
        the top, took a redraw's time per snapshot when the cursor was far down."""
        count = self.row_count
        start, stop = max(0, near - _NEAR_ROWS), min(count, near + _NEAR_ROWS)
        for i in range(start, stop):
            if self.row(i).request_id == request_id:
                return i
        rows = self._kept if self._kept is not None else self._rows
        for i, view in enumerate(rows):
            if view.request_id == request_id:
                return i
        return fallback

    def _sync_size(self) -> None:
        total = len(self._rows)
        count = self.row_count
        title = f"{self.title} {count}/{total}" if self._filter.active else f"{self.title} {count}"
        rows = self._rows
        older = rows.older if isinstance(rows, Finished) else 0  # no longer kept (model.recent)
        if older:
            title += f" · {older} older in the results file"
        if title != self.border_title:
            self.border_title = title
        size = Size(self.scrollable_content_region.width, count + 1)
        old = self.virtual_size
        height = self.scrollable_content_region.height
        if (old.height > height) != (size.height > height):
            self.virtual_size = size  # the scrollbar comes or goes: the layout must change
        elif size != old:
            # Assigning virtual_size re-lays out the whole screen and sends Resize, so every
            # snapshot that changed a row count was drawn twice (26 redraws/s at a 15 Hz poll).
            # Only the scroll range changed: update it without a layout.
            self.set_reactive(RequestTable.virtual_size, size)
            self._scroll_update(size)
            self.refresh()
        self._scroll_to_cursor()

    # -- cursor ---------------------------------------------------------------------------

    def move_cursor(self, row: int) -> None:
        count = self.row_count
        self._cursor = max(0, min(row, count - 1))
        self._detached = False
        self._scroll_to_cursor()
        self._repaint_changed()

    def _body_height(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _scroll_to_cursor(self) -> None:
        top = round(self.scroll_y)
        height = self._body_height()
        if self._cursor < top:
            target = self._cursor
        elif self._cursor >= top + height:
            target = self._cursor - height + 1
        else:
            return
        self.scroll_to(y=target, animate=False, force=True)

    def action_cursor(self, delta: int) -> None:
        if self._detached and delta > 0:
            delta -= 1  # the row below the one that left has slid up under the cursor
        self.move_cursor(self._cursor + delta)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self._cursor + direction * self._body_height())

    def action_first(self) -> None:
        self.move_cursor(0)

    def action_last(self) -> None:
        self.move_cursor(self.row_count - 1)

    def action_choose(self) -> None:
        view = self.selected
        if view is not None:
            self.post_message(self.Chosen(self, view))

    def on_click(self, event: events.Click) -> None:
        if event.y < 1:
            return
        row = round(self.scroll_y) + event.y - 1
        if row < self.row_count:
            self.move_cursor(row)
            if event.chain >= 2:
                self.action_choose()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def on_resize(self) -> None:
        # Textual sends Resize after every layout, also when only the row count changed;
        # re-formatting every row then drew each snapshot twice. Only a new width needs it.
        width = self.scrollable_content_region.width
        if width != self._formatted_width:
            self._formatted_width = width
            self._cache.clear()
            self._drawn.clear()
        self.virtual_size = Size(self.scrollable_content_region.width, self.row_count + 1)
        self._scroll_to_cursor()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._cache.clear()
        self._drawn.clear()

    # -- drawing -------------------------------------------------------------------------

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.get_component_rich_style(f"request-table--{name}")
        return style

    def _line_key(self, y: int, width: int) -> _LineKey:
        if y == 0:
            return ("header", width)
        row = round(self.scroll_y) + y - 1
        if row >= self.row_count:
            if row == 0:
                return ("empty", width, self._filter.active, self._empty_text)
            return ("blank", width)
        view = self.row(row)
        cursor = row == self._cursor and not self._detached
        now = None if view.state.done else self._now
        return (id(view), now, width, cursor and self.has_focus, self._reason(view))

    def _reason(self, view: RequestView) -> WaitReason | None:
        return reason_of(view, self._queue_reasons)

    def _repaint_changed(self) -> None:
        """Repaint the screen lines whose key differs from what was drawn there."""
        width = self.scrollable_content_region.width
        drawn = self._drawn
        changed = [
            Region(0, y, width, 1)
            for y in range(self.scrollable_content_region.height)
            if drawn.get(y) != self._line_key(y, width)
        ]
        if changed:
            self.refresh(*changed)

    def render_lines(self, crop: Region) -> list[Strip]:
        # The widget's style is the same for every line of one pass; Textual works it out
        # from every ancestor's styles each time it is asked (a fifth of drawing a line).
        self._pass_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._pass_style = None

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style if self._pass_style is None else self._pass_style
        key = self._line_key(y, width)
        self._drawn[y] = key
        if y == 0:
            return self._header(width, base)
        row = round(self.scroll_y) + y - 1
        if row >= self.row_count:
            if row == 0:
                return self._empty_line(width, base)
            return Strip.blank(width, base)
        view = self.row(row)
        strip = self._row_strip(view, key, width)
        if row == self._cursor and self.has_focus and not self._detached:
            strip = strip.apply_style(self._style("cursor"))
        return strip.apply_style(base)

    def _header(self, width: int, base: Style) -> Strip:
        text = header_text(width, self._style("header"))
        return Strip(text.render(self.app.console), width).apply_style(base)

    def _empty_line(self, width: int, base: Style) -> Strip:
        message = "no matching requests" if self._filter.active else self._empty_text
        text = Text(message, style=self._style("empty"), no_wrap=True, end="")
        text.truncate(width, pad=True)
        return Strip(text.render(self.app.console), width).apply_style(base)

    def _row_strip(self, view: RequestView, key: _LineKey, width: int) -> Strip:
        """The row of ``view`` without cursor styling, from the cache when still valid."""
        cache_key = (key[0], key[1], key[2], key[4])
        cached = self._cache.get(id(view))
        if cached is not None and cached[0] is view and cached[1] == cache_key:
            return cached[2]
        strip = self._format_row(view, width)
        if len(self._cache) >= _CACHE_ROWS:
            self._cache.clear()
        self._cache[id(view)] = (view, cache_key, strip)
        return strip

    def _format_row(self, view: RequestView, width: int) -> Strip:
        text = row_text(view, width, self._now, self._reason(view), self._style)
        return Strip(text.render(self.app.console), width)
