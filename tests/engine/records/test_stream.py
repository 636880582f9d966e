"""Which records a subscriber reads (``RecordStream``) when the full record it asked for is lost.

After a gap the stream waits for a full record and asks the publisher for one. That record is
a message like any other: zmq drops it for a subscriber whose queue is full, and nothing says
so. A watch beside two busy loops then read nothing more for good (401 requests of a burst
neither ended nor counted unseen). Records of change that keep arriving long after the ask
ask again; and the full record, when it comes, does not say a second time that records were
missed (a second question to the log of ends, about requests the watch had read).
"""

from __future__ import annotations

import msgspec

from stepview.engine.records.facts import EndedFacts, StepFacts
from stepview.engine.records.stream import ASK_FULL_AGAIN_S, RecordStream
from tests.engine.watch.attach_helpers import record


def _change(seq: int) -> StepFacts:
    return msgspec.structs.replace(record(seq), full=False)


def test_a_full_record_asked_for_and_lost_is_asked_for_again() -> None:
    now = [100.0]
    asked: list[float] = []
    stream = RecordStream(lambda: asked.append(now[0]), clock=lambda: now[0])
    assert stream.take(record(1)) is not None and stream.take(_change(2)) is not None
    assert stream.take(_change(5)) is None  # records 3 and 4 never came: a full one, please
    assert asked == [100.0] and stream.asks == 1
    now[0] += ASK_FULL_AGAIN_S / 2
    assert stream.take(_change(6)) is None  # (the full record may still be on its way)
    assert asked == [100.0]
    now[0] += ASK_FULL_AGAIN_S / 2
    assert stream.take(_change(7)) is None  # it was dropped: asked for again
    assert asked == [100.0, 100.0 + ASK_FULL_AGAIN_S] and stream.asks == 2
    assert stream.take(_change(8)) is None and len(asked) == 2  # once a second, no more
    whole = stream.take(record(9))
    assert whole is not None and stream.lost == 4
    assert stream.take(_change(10)) is not None


def test_a_first_full_record_that_never_came_is_asked_for_again() -> None:
    """A new subscriber's first full record can be dropped too."""
    now = [0.0]
    asked: list[int] = []
    stream = RecordStream(lambda: asked.append(1), clock=lambda: now[0])
    now[0] = ASK_FULL_AGAIN_S
    assert stream.take(_change(4)) is None and asked == [1]


def test_the_full_record_after_a_gap_does_not_say_the_gap_again() -> None:
    stream = RecordStream(lambda: None)
    assert stream.take(record(1)) is not None and stream.take(_change(2)) is not None
    assert stream.take(_change(5)) is None
    assert stream.missed == (1.0, 2)
    stream.missed = None  # taken by the watch, which asks the log about it
    assert stream.take(record(9)) is not None
    assert stream.missed is None  # the same gap: nothing more to ask about
    assert stream.take(record(12)) is not None  # a full record that does not follow
    assert stream.missed == (1.0, 9)  # records 10 and 11 went by unseen


def test_a_record_sent_again_is_read_once_or_says_what_was_missed() -> None:
    """An idle core sends its idle record again (zmq may have dropped it, and no later record
    would say so). One the stream has is read once and counted nowhere; one it had missed,
    along with records before it, is the gap it never saw; sent again while the full record
    it asked for is awaited, it asks again, as a record of change does (an idle core sends
    nothing else)."""
    now = [0.0]
    asked: list[float] = []
    stream = RecordStream(lambda: asked.append(now[0]), clock=lambda: now[0])
    end = EndedFacts("a-0123abcd", 1, [7], "length", None, 0.0)
    assert stream.take(record(1)) is not None and stream.take(_change(2)) is not None
    idle = msgspec.structs.replace(_change(3), idle=True, ended=[end])
    assert stream.take(idle) is not None
    for _ in range(3):  # again and again: read already
        assert stream.take(idle) is None
    assert (stream.lost, stream.ended, stream.missed, asked) == (0, [], None, [])
    assert stream.take(_change(4)) is not None  # the core's next step reads on

    missed = RecordStream(lambda: asked.append(now[0]), clock=lambda: now[0])
    assert missed.take(record(1)) is not None  # then 2 and the idle 3 were dropped
    assert missed.take(idle) is None  # sent again: the gap shows
    assert (missed.missed, missed.lost, missed.ended, asked) == ((1.0, 1), 1, [end], [0.0])
    assert missed.take(idle) is None and asked == [0.0]  # (asked a moment ago)
    now[0] += ASK_FULL_AGAIN_S
    assert missed.take(idle) is None and asked == [0.0, ASK_FULL_AGAIN_S]  # asked again
    assert (missed.lost, missed.ended) == (1, [end])  # its ends kept once
    assert missed.take(record(4)) is not None  # the idle core's full record
