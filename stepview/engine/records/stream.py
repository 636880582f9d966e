"""Which of a subscriber's records can be read, in order: :class:`RecordStream`.

A record of change is only right on top of every record before it (since the last full one),
and zmq drops whole records for a subscriber too slow to take them. The stream tells a record
to read from one that cannot be (a gap, another engine core), asks the publisher for a full
record to start again from, and keeps what the records it could not read said of requests
that ended. Plain data, no vLLM: stepview's own engine and the watch both read through it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from stepview.engine.records.entries import merge_many
from stepview.engine.records.facts import EndedFacts, StepFacts

# A full record asked for and not come in this long (monotonic seconds) while records of
# change still arrive: it was dropped like any message for a subscriber whose queue is
# full, and is asked for again (not sooner: the publisher reads subscriptions every few
# steps, and each full record costs the server a step's work).
ASK_FULL_AGAIN_S = 1.0


class RecordStream:
    """Which records a subscriber can read: from a full record on, without a gap.

    A subscriber waits for a full record (the plug-in sends one when anyone subscribes), then
    checks that each record's ``seq`` follows the previous one; a gap (zmq dropped records
    for a subscriber too slow to take them) or another engine core on the address means
    waiting for a full record again, which :meth:`accept` asks for through ``resync``. That
    full record can be dropped too, and nothing would say so: records of change that go on
    arriving while it is awaited, :data:`ASK_FULL_AGAIN_S` after it was asked for, ask again
    (without that, a watch whose full record was dropped read nothing more for good). What
    the records it cannot use said of requests that ended is kept (:attr:`ended`): those
    ends are in no later record, and the full one only says who is left. Who came and went
    inside the records that never arrived, only the plug-in's log of ends can say:
    :attr:`missed` is the last record read before records were missed (a gap, a link that
    dropped, a full record that does not follow), the point to catch up from
    (:mod:`~stepview.engine.records.catch_up`). A full record sent in parts
    (:attr:`~stepview.engine.records.facts.StepFacts.to_come`) is read as one, when its last
    part is in (:meth:`take`). A record that comes again (an idle core sends its last
    message again, :mod:`~stepview.engine.plugin.publisher`) is known by its ``seq`` and
    read once; sent again while a full record is awaited, it asks again, as a record of
    change does: an idle core sends nothing else.
    """

    def __init__(
        self, resync: Callable[[], None], clock: Callable[[], float] = time.monotonic
    ) -> None:
        """``resync`` asks the publisher for a full record; ``clock``: monotonic seconds."""
        self._resync = resync
        self._clock = clock
        self._asked_at = clock()  # the subscription asks for the first full record
        self._next: int | None = None  # the seq the next record must have; None: wait for full
        self._core: float | None = None
        self._prev: tuple[float, int] | None = None  # the last record accepted
        self._seen: tuple[float, int] | None = None  # the newest record received, read or not
        self._parts: list[StepFacts] = []  # of a full record, accepted, its last one not yet
        self.ended: list[EndedFacts] = []  # of records that could not be read
        self.lost = 0  # records dropped while waiting for a full one
        self.last: tuple[float, int] | None = None  # (core_started, seq) of the last one read
        self.missed: tuple[float, int] | None = None  # records after this one were missed
        self.asks = 0  # times a full record was asked for (the subscription's aside)

    @property
    def to_come(self) -> int:
        """Requests a full record in parts has still to name (0: none under way)."""
        return self._parts[-1].to_come if self._parts else 0

    def take(self, facts: StepFacts) -> StepFacts | None:
        """The record to read for ``facts`` (received in order of arrival): itself; the
        whole full record when it is its last part (the parts merged, :func:`merge_many`:
        every request as of that part, what left meanwhile left); ``None`` for a part before
        the last, for a record that cannot be read (:meth:`accept`) and for one received
        before (:meth:`again`)."""
        if self.again(facts):
            return None
        parts = self._parts
        if parts and not (facts.seq == self._next and facts.core_started == self._core):
            self._parts = []  # a gap: the parts so far can never be whole
            self.lost += len(parts)
            if self.last is not None:  # (the first picture's ends were nobody's here)
                self.ended.extend(end for part in parts for end in part.ended)
        read = self.last
        if not self.accept(facts):
            return None
        if not self._parts and not (facts.full and facts.to_come):
            return facts
        self._parts.append(facts)
        if facts.to_come:
            self.last = read  # held: not read yet (a gap catches up from the last one read)
            return None
        whole, self._parts = merge_many(self._parts), []
        return whole

    def accept(self, facts: StepFacts) -> bool:
        """Whether ``facts`` can be read now (in order); asks for a full record when not."""
        if facts.full:
            prev = self._prev
            if (
                self._next is not None  # (awaited after a gap: that gap was said already)
                and prev is not None
                and prev[0] == facts.core_started
                and facts.seq != prev[1] + 1
            ):
                self._missed()  # a link that came back: records went by unseen
            self._next, self._core = facts.seq + 1, facts.core_started
            self.last = self._prev = (facts.core_started, facts.seq)
            return True
        if self._next is not None and facts.seq == self._next and facts.core_started == self._core:
            self._next += 1
            self.last = self._prev = (facts.core_started, facts.seq)
            return True
        if self._next is not None:  # a gap, or another core: the picture is lost
            self._next = None
            self._missed()
            self._ask_full()
        elif self._clock() - self._asked_at >= ASK_FULL_AGAIN_S:
            self._ask_full()  # the full record asked for was dropped: again
        self.lost += 1
        if self._core is not None:  # ends before the first picture were never anyone's here
            self.ended.extend(facts.ended)
        return False

    def again(self, facts: StepFacts) -> bool:
        """Whether ``facts`` came before (sent again by an idle core): if so it is neither
        read nor counted again, and, while a full record is awaited, it asks again."""
        seen = self._seen
        if seen is None or facts.core_started != seen[0] or facts.seq > seen[1]:
            self._seen = (facts.core_started, facts.seq)
            return False
        if self._next is None and self._clock() - self._asked_at >= ASK_FULL_AGAIN_S:
            self._ask_full()
        return True

    def _ask_full(self) -> None:
        self._asked_at = self._clock()
        self.asks += 1
        self._resync()

    def _missed(self) -> None:
        if self.missed is None and self.last is not None:
            self.missed = self.last

    def reset(self) -> None:
        """The link was lost: whatever comes next starts from a full record (zmq subscribes
        again when the link is back, which asks for it)."""
        self._next = None
        self._asked_at = self._clock()
        self._missed()
