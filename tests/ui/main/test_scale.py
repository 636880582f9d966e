"""The Finished pane with 10 000 requests: work per snapshot must not grow with the history.

Counting rows formatted (rather than timing) keeps the test exact on a busy CI machine; one
timing check with a wide margin guards against an accidental O(n) pass per snapshot.
"""

from __future__ import annotations

import time
from dataclasses import replace

from stepview.model.grow import Frozen
from stepview.model.recent import Finished
from stepview.model.snapshot import RequestView, StepSnapshot
from stepview.testing.scenes import make_app, until
from stepview.testing.snapshots import many_finished
from stepview.ui.main.request_table import RequestTable

COUNT = 10_000


def finish_one(snapshot: StepSnapshot, items: list[RequestView], n: int) -> StepSnapshot:
    """The next snapshot: one more finished request, appended like the driver does."""
    items.append(items[n]._replace(request_id=f"new{n}"))
    return replace(
        snapshot,
        step=snapshot.step + 1,
        clock=snapshot.clock + 0.01,
        finished=Frozen(items, len(items)),
    )


async def test_finished_pane_formats_only_new_rows() -> None:
    base = many_finished(COUNT)
    items = list(base.finished)
    base = replace(base, finished=Frozen(items, len(items)))
    app, source = make_app(base)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("tab")  # Finished pane: follows the newest row
        finished = app.query_one("#finished", RequestTable)
        assert finished.row_count == COUNT
        selected = finished.selected
        assert selected is not None and selected.request_id == f"f{COUNT - 1}"

        formatted: list[str] = []
        original = finished._format_row

        def counting(view: RequestView, width: int):  # type: ignore[no-untyped-def]
            formatted.append(view.request_id)
            return original(view, width)

        finished._format_row = counting  # type: ignore[method-assign]
        for n in range(5):
            source.snapshot = finish_one(source.snapshot, items, n)
            await until(pilot, lambda: app.shown is source.snapshot)
        await pilot.pause()
        # Every line of the pane was repainted (it scrolled), but only new rows were formatted.
        assert formatted == [f"new{n}" for n in range(5)]
        selected = finished.selected
        assert selected is not None and selected.request_id == "new4"
        assert finished._rows is source.snapshot.finished  # no copy of the history


async def test_snapshot_cost_does_not_grow_with_history() -> None:
    base = many_finished(COUNT)
    items = list(base.finished)
    app, source = make_app(replace(base, finished=Frozen(items, len(items))))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("tab")
        snapshot = source.snapshot
        started = time.perf_counter()
        for n in range(50):
            snapshot = finish_one(snapshot, items, n)
            app.show_snapshot(snapshot)
        per_snapshot = (time.perf_counter() - started) / 50
        assert per_snapshot < 0.01, f"{per_snapshot * 1000:.1f} ms per snapshot"


async def test_jump_filter_and_navigate_ten_thousand_rows() -> None:
    app, _ = make_app(many_finished(COUNT))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("tab")
        finished = app.query_one("#finished", RequestTable)
        await pilot.press("home")
        assert finished.cursor == 0 and round(finished.scroll_y) == 0
        await pilot.press("pagedown", "j")
        assert finished.cursor > 1
        await pilot.press("G")
        assert finished.cursor == COUNT - 1
        assert round(finished.scroll_y) == finished.max_scroll_y
        await pilot.press("g")
        assert finished.cursor == 0
        await pilot.press("slash", *"is:aborted", "enter")
        assert finished.row_count == COUNT // 10
        assert all(finished.row(i).state.value == "aborted" for i in range(finished.row_count))


async def test_finished_pane_says_how_many_older_requests_only_the_results_file_has() -> None:
    base = many_finished(100)
    kept = Finished(list(base.finished), dropped=250_000)  # a long watch: the oldest let go
    app, _ = make_app(replace(base, finished=kept))
    async with app.run_test(size=(100, 24)) as pilot:
        await pilot.pause()
        finished = app.query_one("#finished", RequestTable)
        assert finished.row_count == 100
        assert str(finished.border_title).endswith("100 · 250000 older in the results file")
