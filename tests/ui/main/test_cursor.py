"""The cursor of a pane never lands on a request the user did not choose (issue 13, case 6).

When the chosen request leaves the pane (it finished, was aborted or was scheduled), the row
below slid up under the cursor and became "selected": a second ``x`` then aborted a request
nobody pointed at. Now the pane selects nothing until the user moves again.
"""

from __future__ import annotations

from textual.app import App, ComposeResult

from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState, RequestView, Timings
from stepview.ui.main.request_table import RequestTable


def views(*ids: str) -> list[RequestView]:
    return [
        RequestView(i, f"prompt {i}", SamplingSpec(), RequestState.DECODING, Timings(0.0))
        for i in ids
    ]


class _OnePane(App[None]):
    def compose(self) -> ComposeResult:
        yield RequestTable("Running", id="running")


async def test_the_chosen_request_leaving_selects_nothing_until_the_user_moves() -> None:
    app = _OnePane()
    async with app.run_test(size=(80, 12)) as pilot:
        table = app.query_one(RequestTable)
        table.focus()
        rows = views("r1", "r2", "r3", "r4")
        table.show(rows, 1.0)
        await pilot.press("down")
        assert table.selected is not None and table.selected.request_id == "r2"
        table.show([rows[0], *rows[2:]], 2.0)  # r2 left: r3 slid up under the cursor
        await pilot.pause()
        assert table.selected is None
        assert table.row(table.cursor).request_id == "r3"  # the cursor stayed where it was
        table.show([rows[0], *rows[2:]], 3.0)  # later snapshots do not pick a row either
        assert table.selected is None
        await pilot.press("down")  # the row below the one that left: r3
        assert table.selected is not None and table.selected.request_id == "r3"
        table.show([rows[0], rows[3]], 4.0)
        await pilot.press("up")
        assert table.selected is not None and table.selected.request_id == "r1"


async def test_a_request_that_stays_keeps_the_cursor_as_rows_come_and_go() -> None:
    app = _OnePane()
    async with app.run_test(size=(80, 12)) as pilot:
        table = app.query_one(RequestTable)
        table.focus()
        rows = views("r1", "r2", "r3")
        table.show(rows, 1.0)
        await pilot.press("down", "down")
        table.show([rows[1], rows[2], *views("r4")], 2.0)  # r1 left above it
        assert table.selected is not None and table.selected.request_id == "r3"
