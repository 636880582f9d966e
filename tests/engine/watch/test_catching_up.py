"""What a catch-up folds in with the full record after a gap: only that gap's requests.

:class:`CatchUp` over a stand-in subscriber (it only asks and unasks) and answers made by the
plug-in's real :class:`EndLog`: the ids of ends that fell out of the log count only where
their records were the ones lost. Counting every id the log had lost since the point asked
from counted, beside a busy machine, a request twice (a second gap asks again from a later
point) or one the watch then read ended (588 "unseen" of 401, 113 of them seen).
"""

from __future__ import annotations

import pytest

from stepview.engine.plugin.end_log import EndLog
from stepview.engine.records.catch_up import decode_answer
from stepview.engine.records.facts import EndedFacts
from stepview.engine.watch.link.catching_up import CatchUp
from tests.engine.plugin.test_end_log import _log_of
from tests.engine.watch.attach_helpers import record

pytestmark = pytest.mark.engine  # test_end_log's requests carry vLLM's RequestStatus


class _Subscriber:
    """What :class:`CatchUp` asks of the records' subscriber, without a socket."""

    address = "ipc:///nowhere"
    answers: list[object] = []

    def ask_catch_up(self, after: int) -> None:
        pass

    def unask(self) -> None:
        pass


def _caught(
    log: EndLog,
    since: int,
    seq: int,
    *,
    carried: list[str] | None = None,
    held: list[str] | None = None,
) -> object:
    """What is folded in with full record ``seq`` after a gap from ``since``, the record
    ending ``carried``, the watch holding ``held`` before it."""
    catch_up = CatchUp(_Subscriber())  # type: ignore[arg-type]
    catch_up.after = (7.0, since)  # the log's core started at 7.0 (test_end_log)
    catch_up.answer = decode_answer(log.answer(since))
    ended = [EndedFacts(core_id, 1, [1], "length") for core_id in carried or []]
    return catch_up.take(record(seq, started=7.0, seq=seq, ended=ended), held or [])


def test_only_the_ids_of_the_records_lost_are_missing() -> None:
    log = EndLog(max_ends=2)
    for tag in range(1, 9):
        _log_of(log, tag, f"r{tag}-1")  # r1 .. r6 fell out, r7 and r8 are held
    caught = _caught(log, since=2, seq=5, carried=["r5-1"])
    assert caught is not None
    assert caught.missing == ["r3-1", "r4-1", "r5-1"]  # r6: a record after the full one
    assert caught.logged == []  # r7 and r8 end in later records
    again = _caught(log, since=5, seq=8, carried=["r8-1"], held=["r8-1"])  # a second gap:
    # no id twice (r8, held by the watch, is ended by the full record that carries its end)
    assert again is not None
    assert again.missing == ["r6-1"] and [e.end.req_id for e in again.logged] == ["r7-1"]


def test_an_answer_without_tags_counts_every_id_it_lists() -> None:
    """A plug-in from before the tags: what it says fell out is all there is to count."""
    log = EndLog(max_ends=1)
    for tag in range(1, 5):
        _log_of(log, tag, f"r{tag}-1")
    catch_up = CatchUp(_Subscriber())  # type: ignore[arg-type]
    catch_up.after = (7.0, 0)
    answer = decode_answer(log.answer(0))
    catch_up.answer = answer.__class__(
        answer.core_started, answer.after, answer.upto, answer.known_after, [], answer.missing
    )
    caught = catch_up.take(record(2, started=7.0, seq=2))
    assert caught is not None and caught.missing == ["r1-1", "r2-1", "r3-1"]


def test_a_request_that_came_and_went_ending_in_the_full_records_step_comes_from_the_log() -> None:
    """The full record after a gap carries the ends of its own step; for a request the watch
    never held (it arrived in the records lost) that end comes without the intro, which only
    the log has: it is folded in like the gap's others. Left out as the record's own, it was
    neither shown nor counted (4 of a burst of 400, beside six busy loops)."""
    log = EndLog()
    for tag in range(3, 7):
        _log_of(log, tag, f"r{tag}-1")
    caught = _caught(log, since=2, seq=6, carried=["r5-1", "r6-1"], held=["r5-1"])
    assert caught is not None and caught.missing == []
    assert [e.end.req_id for e in caught.logged] == ["r3-1", "r4-1", "r6-1"]  # r5: its own
