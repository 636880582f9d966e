"""The Finished pane with 10 000 requests: work per snapshot must not grow with the history.

Work is counted, never timed, so the tests are exact on a busy CI machine: the rows formatted,
and every read of the history's list (an accidental O(n) pass per snapshot, even one in C
such as a copy or a comparison, reads the whole list). What a snapshot costs in seconds is
``benchmarks/ui_scale.py``'s figure.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import SupportsIndex, overload

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


class CountingList(list[RequestView]):
    """The driver's list of finished requests, counting the items anything reads from it."""

    reads = 0

    @overload
    def __getitem__(self, index: SupportsIndex) -> RequestView: ...
    @overload
    def __getitem__(self, index: slice) -> list[RequestView]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> RequestView | list[RequestView]:
        got = super().__getitem__(index)
        self.reads += len(got) if isinstance(got, list) else 1
        return got

    def __iter__(self) -> Iterator[RequestView]:  # also what islice, list() and == go through
        for item in super().__iter__():
            self.reads += 1
            yield item


async def reads_per_snapshot(history: int, snapshots: int = 50) -> float:
    """Items read from the history's list per snapshot shown, each one more finished
    request, over a history of ``history`` requests."""
    base = many_finished(history)
    items = CountingList(base.finished)
    app, source = make_app(replace(base, finished=Frozen(items, len(items))))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("tab")
        await pilot.pause()  # the pane drawn once: not counted
        finished = app.query_one("#finished", RequestTable)
        assert finished.row_count == history
        coming = [source.snapshot]
        for n in range(snapshots):
            coming.append(finish_one(coming[-1], items, n))
        items.reads = 0
        for snapshot in coming[1:]:
            app.show_snapshot(snapshot)
        assert finished.row_count == history + snapshots  # they were shown
        return items.reads / snapshots


async def test_snapshot_cost_does_not_grow_with_history() -> None:
    small = await reads_per_snapshot(100)
    large = await reads_per_snapshot(COUNT)
    # As many reads over 10 000 requests as over 100: nothing in showing a snapshot walks
    # the history (the rows the screen then formats are counted by the test above).
    assert large == small, (
        f"{small} items read per snapshot with 100 requests, {large} with {COUNT}"
    )
    assert 0 < large < 100  # the count sees the pane's reads (the newest rows it looks at)


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
