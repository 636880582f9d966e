"""A full record sent in parts, read as one (``RecordStream.take``).

A new subscriber's full record goes in parts over a few steps when the core holds many
requests (:mod:`stepview.engine.plugin.naming`): the reader holds the parts and reads them as
one full record when the last is in, the same picture a whole one would have given then. A gap
on the way means the parts can never be whole: the reader waits for the next full record, and
keeps the ends the parts carried, as it does for any record it could not read.
"""

from __future__ import annotations

from stepview.engine.records.facts import EndedFacts
from stepview.engine.records.stream import RecordStream
from tests.engine.watch.attach_helpers import part


def test_the_parts_are_read_as_one_full_record_when_the_last_is_in() -> None:
    asked: list[int] = []
    stream = RecordStream(lambda: asked.append(1))
    assert stream.take(part(1, 0, "old", full=True)) is not None  # read: a whole one
    ended = EndedFacts("x", 1, [7], "length")
    parts = [
        part(2, 4, "a", "b", full=True),
        part(3, 2, "c", finished=["x"], ended=[ended]),
        part(4, 0, "d", "a"),
    ]
    assert stream.take(parts[0]) is None and stream.take(parts[1]) is None
    assert stream.last == (1.0, 1)  # the parts are not read yet
    whole = stream.take(parts[2])
    assert whole is not None and whole.full and whole.seq == 4 and whole.to_come == 0
    assert [r.req_id for r in whole.requests] == ["a", "b", "c", "d"]
    assert whole.finished == ["x"] and whole.ended == [ended]
    assert stream.last == (1.0, 4) and stream.missed is None and not asked
    after = part(5, 0, "e")
    assert stream.take(after) is after  # a record of change, read as it is


def test_a_full_record_that_starts_during_the_parts_joins_them() -> None:
    """Another watch subscribed: the plug-in starts over, in order; nothing was missed."""
    stream = RecordStream(lambda: None)
    assert stream.take(part(1, 3, "a", full=True)) is None
    assert stream.take(part(2, 3, "b", "c", full=True)) is None
    whole = stream.take(part(3, 0, "d"))
    assert whole is not None and whole.full
    assert [r.req_id for r in whole.requests] == ["a", "b", "c", "d"]
    assert stream.missed is None


def test_a_gap_in_the_parts_waits_for_the_next_full_record() -> None:
    asked: list[int] = []
    stream = RecordStream(lambda: asked.append(1))
    assert stream.take(part(1, 0, "a", full=True)) is not None
    ended = EndedFacts("a", 1, [7], "length")
    assert stream.take(part(2, 5, "b", full=True)) is None
    assert stream.take(part(3, 3, "c", finished=["a"], ended=[ended])) is None
    assert stream.take(part(5, 0, "d")) is None  # record 4 was lost: the parts never whole
    assert asked == [1] and stream.missed == (1.0, 1)  # catch up from the last one read
    assert stream.ended == [ended]  # what the parts said of requests that ended is kept
    assert stream.lost == 3
    whole = stream.take(part(6, 0, "b", "c", full=True))
    assert whole is not None and [r.req_id for r in whole.requests] == ["b", "c"]


def test_a_full_record_after_a_gap_in_the_parts_starts_afresh() -> None:
    stream = RecordStream(lambda: None)
    assert stream.take(part(1, 4, "a", full=True)) is None
    assert stream.take(part(4, 2, "b", full=True)) is None  # records 2 and 3 were lost
    assert stream.lost == 1 and not stream.ended  # (the first picture's: nobody's here yet)
    whole = stream.take(part(5, 0, "c"))
    assert whole is not None and [r.req_id for r in whole.requests] == ["b", "c"]
