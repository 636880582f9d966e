"""A watch that lost records catching up from the plug-in's log of ends: :class:`CatchUp`.

When records were missed (:attr:`RecordStream.missed
<stepview.engine.records.stream.RecordStream.missed>`: zmq dropped them for a watch too slow,
or its link dropped), the watch asks the plug-in for every end logged after the last record
it read (:mod:`stepview.engine.records.catch_up`), at once: the sooner it asks, the less has
fallen out of the log. The full record that follows a gap is held (up to
:data:`CATCH_UP_WAIT_S`) until the answer is in, because that record settles who left: a
request it no longer holds must end as the log says (its tokens, its finish reason), not as
"left the engine", and one that came and went in between must be adopted and ended before it.

What is folded in with that record (:meth:`CatchUp.take`) is exactly what the watch missed:
the ends tagged after the record it read last and up to this one, less those this record
carries itself for requests the watch holds (one it never held came and went in the gap and
ended in this record's step: the record has its end, only the log its intro). Ends tagged
after it come in later records (or in the next catch-up);
:class:`~stepview.engine.watch.link.watched_core.WatchedCore` ends each request once whatever
repeats it.

The answer is a message like any other, and a watch that lost records is one whose queue
overflows: it can be dropped again and again. After the wait the full record is read all the
same, but the gap is not given up: it stays open (:class:`Gap`, read past), asked about every
:data:`ASK_AGAIN_S`, and the answer, when it comes, is folded in with the next record read:
the requests that came and went in it are adopted and ended then (less those the watch had
already ended or counted), the ids that fell out of the log counted unseen. A gap that opens
meanwhile joins the same question (the answer holds every end after the oldest one). Each
new question, and each time the full record is asked for again, asks under a new name, so an
answer made before the full record it is folded with was built (too old to hold all it
missed) is never taken. A plug-in without the log (an older one) never answers: after one
wait for nothing the watch stops holding records for it (it still asks), and after
:data:`LATE_ANSWER_S` it gives the gaps up and says so (those whose end it saw in records it
could not read, it counts unseen then: they wait for the answer, which would show them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import NamedTuple

from stepview.engine.records.catch_up import CatchUpAnswer, LoggedEnd
from stepview.engine.records.channel import FactsSubscriber
from stepview.engine.records.facts import EndedFacts, StepFacts
from stepview.engine.records.stream import RecordStream
from stepview.engine.watch.link.unseen import UnseenRequests

log = logging.getLogger(__name__)

# How long the full record after a gap waits for the log's answer (monotonic seconds), and
# how often the question is asked again meanwhile (an answer is dropped like any message
# for a subscriber whose queue is full), and after.
CATCH_UP_WAIT_S = 5.0
ASK_AGAIN_S = 1.0
# How long gaps read past without the answer are asked about before they are given up.
LATE_ANSWER_S = 60.0


class Caught(NamedTuple):
    """What the log says the watch missed, folded in with one record."""

    logged: list[LoggedEnd]  # ends it kept, oldest first, to adopt and end
    missing: list[str]  # core ids of ends that fell out of it
    complete: bool  # every end after the point asked from is in one of the two


@dataclass
class Gap:
    """Records missed after ``since``, up to the full record ``upto`` read next (``None``:
    not read yet). Read past without the answer, ``handled`` holds the core ids the watch
    had by then (held, or ended by that record): the answer's ends of those are not its to
    adopt or count again."""

    since: int
    upto: int | None = None
    handled: frozenset[str] | None = None  # None: folded with its own full record
    carried: set[str] = field(default_factory=set)  # held ones the full record ends itself
    # Read past: requests whose end the watch got in records it could not read, never held:
    # the answer shows them; they are counted unseen if it does not.
    deferred: list[str] = field(default_factory=list)


class CatchUp:
    """One engine core's question to the log, its answer, and the full record that waits."""

    def __init__(self, subscriber: FactsSubscriber, unseen: UnseenRequests | None = None) -> None:
        """``unseen``: where the requests of gaps given up are counted."""
        self._subscriber = subscriber
        self._unseen = unseen
        self.after: tuple[float, int] | None = None  # (core_started, seq) asked after
        self.answer: CatchUpAnswer | None = None
        self.gaps: list[Gap] = []  # the question's, oldest first; the last may await its full
        self._asked_at = 0.0
        self._full_asks = 0  # the stream's asks for a full record, as of the question
        self._wait_until: float | None = None
        self._late_at: float | None = None  # when a gap was first read past without an answer
        self.answered = False  # an answer ever came from this plug-in
        self.unanswered = False  # waited once for nothing: a plug-in without the log

    def want(self, stream: RecordStream) -> None:
        """After each read of the sockets: ask when records were missed (a gap that opens
        while others are read past joins their question), again when the full record after
        the gap was asked for again, or now and then for gaps read past; give those up
        after :data:`LATE_ANSWER_S`."""
        missed = stream.missed
        gaps = self.gaps
        if missed is not None and gaps and gaps[-1].upto is None:  # its full record not read
            if self.after is not None and missed == (self.after[0], gaps[-1].since):
                stream.missed = None  # the same gap (its link dropped meanwhile)
            missed = None  # a gap after it waits until that full record is read
        if missed is not None:
            stream.missed = None
            if self.after is not None and self.after[0] != missed[0]:
                self._give_up("its engine core restarted")
            gaps = self.gaps
            gaps.append(Gap(missed[1]))
            self.after = (missed[0], gaps[0].since)
            self._full_asks = stream.asks
            self._ask(fresh=True)
            return
        if self.after is None or not gaps:
            return
        if gaps[-1].upto is None:
            if stream.asks != self._full_asks:  # the full record was dropped: asked again
                self._full_asks = stream.asks
                self._ask(fresh=True)
            return
        now = time.monotonic()
        if self._late_at is not None and now - self._late_at >= LATE_ANSWER_S:
            self._give_up(f"no answer in {LATE_ANSWER_S:.0f} s")
        elif self.answer is None and now - self._asked_at >= ASK_AGAIN_S:
            self._ask(fresh=False)

    def _ask(self, fresh: bool) -> None:
        """Ask (``fresh``: under a new name, see the module docstring); what was answered
        before no longer counts then."""
        assert self.after is not None
        if fresh:
            self.answer = None
            self._subscriber.answers = []
        self._asked_at = time.monotonic()
        self._subscriber.ask_catch_up(self.after[1], fresh=fresh)

    def received(self) -> None:
        """Take the answer to the open question from what the subscriber received."""
        answers = self._subscriber.answers
        if not answers:
            return
        self._subscriber.answers = []
        after = self.after
        for answer in answers:
            if after is not None and answer.after == after[1] and self.answer is None:
                self.answer = answer
                self.answered, self.unanswered = True, False
                self._subscriber.unask()

    def holds(self, facts: StepFacts) -> bool:
        """Whether ``facts`` (the next record to read) must wait for the answer."""
        after = self.after
        if after is None or self.answer is not None or not facts.full or self.unanswered:
            return False
        gap = self.gaps[-1] if self.gaps else Gap(after[1])
        if gap.upto is not None or facts.core_started != after[0] or facts.seq <= gap.since:
            return False
        now = time.monotonic()
        if self._wait_until is None:
            self._wait_until = now + CATCH_UP_WAIT_S
        if now >= self._wait_until:
            self.unanswered = not self.answered
            log.warning("stepview: no answer from the log of ends at %s in %.0f s: the view "
                        "goes on; requests that came and went in records %d-%d are shown "
                        "when it answers (asked again every %.0f s)", self._subscriber.address,
                        CATCH_UP_WAIT_S, gap.since + 1, facts.seq, ASK_AGAIN_S)  # fmt: skip
            return False
        if now - self._asked_at >= ASK_AGAIN_S:
            self._ask(fresh=False)
        return True

    def take(
        self, facts: StepFacts, held: Iterable[str] = (), lost: Sequence[EndedFacts] = ()
    ) -> Caught | None:
        """What to fold in with ``facts`` (read now; ``held``: the core ids the watch holds
        before it, ``lost``: the ends of records it could not read, folded in with it);
        ``None``: nothing. A full record after the gap awaiting one closes it: with the
        answer, everything is folded in; without it, the gap is read past (and kept). Any
        record folds in an answer that came for gaps read past."""
        after = self.after
        if after is None:
            return None
        if facts.core_started != after[0]:
            if facts.full:  # another engine core (whose tags start over): nothing to fold
                self._give_up("its engine core restarted")
            return None
        if not self.gaps:  # (a question set from outside: one gap, from its point)
            self.gaps.append(Gap(after[1]))
        gap = self.gaps[-1]
        if gap.upto is None:
            if not facts.full or facts.seq <= gap.since:
                return None
            had = frozenset(held)
            # Ends the record carries are its own to end for the requests the watch holds;
            # one it never held came and went in the gap: only the log has its intro.
            gap.upto, gap.carried = facts.seq, {e.req_id for e in facts.ended if e.req_id in had}
            self._wait_until = None
            if self.answer is None:
                ends = dict.fromkeys(e.req_id for e in chain(lost, facts.ended))
                gap.deferred = [core_id for core_id in ends if core_id not in had]
                gap.handled = had
                if self._late_at is None:
                    self._late_at = time.monotonic()
                return None
        elif self.answer is None:
            return None
        return self._fold(self.answer)

    def _fold(self, answer: CatchUpAnswer) -> Caught | None:
        """Every gap's part of ``answer``; the question closes."""
        gaps, after = self.gaps, self.after
        assert after is not None
        self._close()
        if answer.core_started != after[0]:
            return None  # from another engine core (whose tags start over)
        logged: list[LoggedEnd] = []
        missing: list[str] = []
        tagged = len(answer.missing_tags) == len(answer.missing)
        for gap in gaps:
            since, upto = gap.since, gap.upto
            assert upto is not None
            # Read past, the gap's requests the watch had are its own already; with its
            # full record, those it carries (their ids, fallen out, are counted all the same)
            done = gap.carried if gap.handled is None else gap.handled
            ends = [e for e in answer.ends if since < e.tag <= upto and e.end.req_id not in done]
            done = gap.handled or frozenset()
            fell = [c for c in answer.missing if c not in done] if gap is gaps[0] else []
            if tagged:  # those after ``upto`` are not this gap's (see the field)
                pairs = zip(answer.missing, answer.missing_tags, strict=True)
                fell = [c for c, tag in pairs if since < tag <= upto and c not in done]
            shown = {e.end.req_id for e in ends}
            fell += [c for c in gap.deferred if c not in shown and c not in fell]
            logged += ends
            missing += fell
            log.info("stepview: caught up%s on records %d-%d from %s's log of ends: %d ended, "
                     "%d fell out of it", "" if gap.handled is None else " late", since + 1,
                     upto, self._subscriber.address, len(ends), len(fell))  # fmt: skip
        return Caught(logged, missing, answer.known_after <= gaps[0].since)

    def _give_up(self, why: str) -> None:
        """The gaps cannot be caught up on (``why``): said, with what was lost."""
        spans = ", ".join(f"{g.since + 1}-{'' if g.upto is None else g.upto}" for g in self.gaps)
        log.warning("stepview: the log of ends at %s cannot be asked about records %s (%s): "
                    "requests that came and went in them are not shown, and cannot be "
                    "counted", self._subscriber.address, spans, why)  # fmt: skip
        deferred = [core_id for gap in self.gaps for core_id in gap.deferred]
        if deferred and self._unseen is not None:  # (their ends came: these can be)
            self._unseen.past_the_log(deferred, (), False)
        self._close()

    def _close(self) -> None:
        self.after, self.answer, self._wait_until, self._late_at = None, None, None, None
        self.gaps = []
        self._subscriber.unask()
