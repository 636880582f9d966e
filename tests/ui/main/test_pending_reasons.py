"""The Pending pane says why each row waits, and behind whom, at 100 columns.

The state column was 15 wide: a request held back by the one ahead of it read
``waiting·behind l…``, and a preempted one ``preempted·behind…``.
"""

from __future__ import annotations

import dataclasses

import pytest

from stepview.model.scheduling import BEHIND, WaitReason
from stepview.model.snapshot import RequestState, StepSnapshot
from stepview.testing.scenes import make_app, until
from stepview.testing.snapshots import mid_run, request
from stepview.ui.main.request_table import RequestTable


def queue_behind_a_load_request() -> StepSnapshot:
    """``mid_run`` with two more rows held back by ``load1-12`` (a ``w`` load's id)."""
    behind = WaitReason(BEHIND, "behind load1-12, which vLLM could not schedule", "load1-12")
    snapshot = mid_run()
    rows = (
        request("load1-13", "x", RequestState.WAITING, arrival=10.5, wait=behind),
        request("load1-9", "y", RequestState.PREEMPTED, arrival=9.0, preemptions=1, wait=behind),
    )
    return dataclasses.replace(snapshot, active=(*snapshot.active, *rows))


def pending_rows(table: RequestTable) -> list[str]:
    return [table.render_line(y).text for y in range(1, table.row_count + 1)]


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ((100, 30), ["waiting·behind u4 ", "waiting·behind load1-12 ", "preempted·behind "]),
        (
            (120, 40),
            ["waiting·behind u4 ", "waiting·behind load1-12 ", "preempted·behind load1-12 "],
        ),
        ((80, 24), ["waiting·behind u4 ", "waiting·behind ", "preempted·behind "]),
    ],
)
async def test_the_pending_pane_shows_the_wait_reason_whole(
    size: tuple[int, int], expected: list[str]
) -> None:
    app, _ = make_app(queue_behind_a_load_request())
    async with app.run_test(size=size) as pilot:
        table = app.query_one("#pending", RequestTable)
        await until(pilot, lambda: table.row_count == 5)
        rows = [row for row in pending_rows(table) if "·behind" in row]
        assert len(rows) == len(expected)
        for row, shown in zip(rows, expected, strict=True):
            assert shown in row, row
        assert all("…" not in row.split("·behind")[1][:12] for row in rows), rows
