"""The backlog folds its oldest records into the next of their engine core, one merge each."""

from __future__ import annotations

from typing import cast

from stepview.engine.watch.link.backlog import Backlog, fold_oldest
from stepview.engine.watch.link.descriptions import Wait
from stepview.engine.watch.link.watched_core import WatchedCore
from tests.engine.watch.attach_helpers import record, request

A, B = cast(WatchedCore, object()), cast(WatchedCore, object())  # two ranks' cores


def backlog_of(*named: tuple[WatchedCore, int, Wait | None]) -> Backlog:
    return Backlog(
        (core, record(step, request(f"r{step}"), full=False, seq=step), wait)
        for core, step, wait in named
    )


def steps(backlog: Backlog) -> list[tuple[WatchedCore, int, list[str]]]:
    return [(core, facts.step, [r.req_id for r in facts.requests]) for core, facts, _ in backlog]


def test_the_oldest_fold_into_the_next_record_of_their_own_core() -> None:
    held = Wait(("r1",), 5.0)
    backlog = backlog_of((A, 1, held), (B, 1, None), (A, 2, None), (A, 3, None), (B, 2, None))
    assert fold_oldest(backlog, 3) == 3
    assert steps(backlog) == [(A, 3, ["r1", "r2", "r3"]), (B, 2, ["r1", "r2"])]
    assert backlog[0][2] == held  # what a folded record waited for, its merge waits for


def test_a_core_with_no_later_record_keeps_one() -> None:
    backlog = backlog_of((A, 1, None), (A, 2, None), (B, 1, None))
    assert fold_oldest(backlog, 2) == 1
    assert steps(backlog) == [(A, 2, ["r1", "r2"]), (B, 1, ["r1"])]


def test_a_fold_waits_for_everything_its_records_waited_for() -> None:
    first, second = Wait(("r1",), 5.0), Wait(("r2", "r9"), 4.0)
    backlog = backlog_of((A, 1, first), (A, 2, second), (A, 3, None))
    assert fold_oldest(backlog, 2) == 2
    assert backlog[0][2] == Wait(("r1", "r2", "r9"), 5.0)  # every request, the later deadline


def test_a_full_record_after_a_gap_is_never_folded_across() -> None:
    """A watch holding the full record after a gap for the log's answer lost more records
    meanwhile: the next full record (after that second gap) starts a run of its own, or the
    second gap's point of catching up would be gone (its requests neither shown nor counted)."""
    backlog = backlog_of((A, 1, None), (A, 2, None), (B, 1, None))
    backlog.insert(2, (A, record(7, request("r7")), None))  # records 3 to 6 never came
    backlog.append((A, record(8, request("r8"), full=False), None))
    assert fold_oldest(backlog, 4) == 2  # A1 and A2 as one, A7 into A8 (which follows it)
    assert steps(backlog) == [(A, 2, ["r1", "r2"]), (B, 1, ["r1"]), (A, 8, ["r7", "r8"])]
    assert backlog[2][1].full  # (A8 read as one with the full record before it)
