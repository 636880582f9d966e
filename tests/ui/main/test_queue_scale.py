"""The Pending pane with 10 000 waiting requests: work per snapshot must not grow with the queue.

Snapshots here are shaped as the driver shapes them (their active requests in an
:class:`~stepview.model.active.ActiveBuilder`'s chunks). Work is counted, never timed: the
requests the panes test to sort a snapshot into Pending and Running. What a snapshot costs in
seconds is ``benchmarks/ui_scale.py``'s figure (100 000 waiting there).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

import pytest

from stepview.model.active import CHUNK, ActiveBuilder
from stepview.model.snapshot import RequestState, RequestView, StepSnapshot
from stepview.testing.scenes import make_app, until
from stepview.testing.snapshots import mid_run, request
from stepview.ui.main import panes
from stepview.ui.main.chunk_filter import Select
from stepview.ui.main.filtering import RequestFilter
from stepview.ui.main.request_table import RequestTable

RUNNING = 8


class Queue:
    """A driver's active requests: ``RUNNING`` decoding, then ``waiting`` in the queue."""

    def __init__(self, waiting: int) -> None:
        self.builder = ActiveBuilder()
        self.views: dict[str, RequestView] = {}
        for i in range(RUNNING):
            self.add(request(f"r{i}", f"running {i}", RequestState.DECODING, tokens=1))
        for i in range(waiting):
            self.add(request(f"w{i}", f"waiting {i}", RequestState.WAITING, arrival=1.0))
        self.snapshot = replace(mid_run(), finished=())

    def add(self, view: RequestView) -> None:
        self.builder.append(view)
        self.views[view.request_id] = view

    def change(self, request_id: str, **fields: object) -> None:
        old = self.views[request_id]
        new = self.views[request_id] = old._replace(**fields)  # type: ignore[arg-type]
        self.builder.set(old, new)

    def next(self) -> StepSnapshot:
        snapshot = self.snapshot
        self.snapshot = replace(
            snapshot,
            step=snapshot.step + 1,
            clock=snapshot.clock + 0.01,
            active=self.builder.freeze(),
        )
        return self.snapshot


@pytest.fixture
def tested(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many requests the panes' sorting has tested (patched in before the app is made)."""
    counts = [0]
    in_pane = panes._in_pane

    def counting(name: str) -> Select:
        select = in_pane(name)

        def counted(views: Sequence[RequestView]) -> Iterator[RequestView]:
            counts[0] += len(views)
            return select(views)

        return counted

    monkeypatch.setattr(panes, "_in_pane", counting)
    return counts


async def count_per_snapshot(waiting: int, tested: list[int], snapshots: int = 20) -> float:
    queue = Queue(waiting)
    app, _ = make_app(queue.next())
    async with app.run_test(size=(80, 24)):
        pending = app.query_one("#pending", RequestTable)
        assert pending.row_count == waiting
        tested[0] = 0
        for step in range(snapshots):  # each one: every running request gets a token
            for i in range(RUNNING):
                queue.change(f"r{i}", completions=(), prompt_tokens=step)
            app.show_snapshot(queue.next())
        assert pending.row_count == waiting
        assert app.query_one("#running", RequestTable).row(0) is queue.views["r0"]
        return tested[0] / snapshots


async def test_sorting_a_snapshot_into_panes_does_not_grow_with_the_queue(
    tested: list[int],
) -> None:
    small = await count_per_snapshot(100, tested)
    large = await count_per_snapshot(10_000, tested)
    assert small == large, (
        f"{small} requests tested per snapshot with 100 waiting, {large} with 10 000"
    )
    assert 0 < large <= 2 * CHUNK  # the one chunk the running requests are in, for each pane


async def test_the_chosen_waiting_request_keeps_the_cursor_far_down_a_long_queue() -> None:
    queue = Queue(10_000)
    app, source = make_app(queue.next())
    async with app.run_test(size=(80, 24)) as pilot:
        pending = app.query_one("#pending", RequestTable)
        pending.focus()
        pending.move_cursor(5_000)
        assert pending.selected is not None and pending.selected.request_id == "w5000"
        for i in range(10):  # ten ahead of it are scheduled: it moves up ten rows
            queue.change(f"w{i}", state=RequestState.PREFILLING)
        source.snapshot = queue.next()
        await until(pilot, lambda: app.shown is source.snapshot)
        assert pending.cursor == 4_990 and pending.selected.request_id == "w5000"
        for i in range(10, 1_010):  # a thousand more, further than a screen: found again
            queue.change(f"w{i}", state=RequestState.PREFILLING)
        source.snapshot = queue.next()
        await until(pilot, lambda: app.shown is source.snapshot)
        assert pending.cursor == 3_990 and pending.selected.request_id == "w5000"
        queue.change("w5000", state=RequestState.PREFILLING)  # it leaves: nothing is chosen
        source.snapshot = queue.next()
        await until(pilot, lambda: app.shown is source.snapshot)
        assert pending.selected is None and pending.cursor == 3_990


async def test_the_filter_over_a_long_queue_tests_only_what_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    matched = [0]
    matches = RequestFilter.matches

    def counting(self: RequestFilter, view: RequestView) -> bool:
        matched[0] += 1
        return matches(self, view)

    monkeypatch.setattr(RequestFilter, "matches", counting)
    queue = Queue(10_000)
    app, source = make_app(queue.next())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("slash", *"w12", "enter")
        pending = app.query_one("#pending", RequestTable)
        assert pending.row_count == 1 + 10 + 100  # w12, w120-w129, w1200-w1299
        matched[0] = 0
        for step in range(5):
            queue.change("r0", prompt_tokens=step)  # running requests: their chunk alone
            queue.change(f"w{12 + step}", prompt_tokens=step)  # and the queue's first chunk
            source.snapshot = queue.next()
            await until(pilot, lambda: app.shown is source.snapshot)
        assert pending.row_count == 111 and pending.row(0).request_id == "w12"
        assert pending.row(0).prompt_tokens == 0 and pending.row(0) is queue.views["w12"]
        # Each snapshot: the chunk that changed (the running requests and the queue's first),
        # its waiting requests in Pending's filter and its running ones in Running's.
        assert matched[0] <= 5 * CHUNK, matched[0]
