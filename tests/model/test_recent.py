"""Finished requests in memory: the latest ones, however many a run finishes."""

from __future__ import annotations

from stepview.model.recent import Finished, FinishedLog, since, total_of


def test_memory_stays_within_twice_the_bound_and_the_total_counts_every_one() -> None:
    log: FinishedLog[int] = FinishedLog(keep=100)
    views = []
    for i in range(1_000):
        log.append(i)
        views.append(log.view())
        assert len(views[-1]) <= 200
    last = views[-1]
    assert last.total == 1_000 == len(log) and list(last)[-1] == 999
    assert last.older == 1_000 - len(last) and last[0] == last.older
    # What finished since an earlier view: by totals, as the trace and the insight ask.
    assert list(last.since(990)) == list(range(990, 1_000))
    assert list(since(last, 0)) == list(last)  # what is no longer kept is not made up
    # An old view still shows what it showed (its list lives on while it is held).
    assert list(views[150])[-1] == 150 and views[150].total == 151
    assert last[0] == last.older and last[-1] == 999


def test_any_sequence_of_a_whole_run_reads_the_same() -> None:
    whole = [1, 2, 3]
    assert total_of(whole) == 3 and list(since(whole, 1)) == [2, 3]
    assert Finished(whole) == whole and total_of(Finished(whole)) == 3
