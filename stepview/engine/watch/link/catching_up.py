"""A watch that lost records catching up from the plug-in's log of ends: :class:`CatchUp`.

When records were missed (:attr:`RecordStream.missed
<stepview.engine.records.entries.RecordStream.missed>`: zmq dropped them for a watch too slow,
or its link dropped), the watch asks the plug-in for every end logged after the last record
it read (:mod:`stepview.engine.records.catch_up`), at once: the sooner it asks, the less has
fallen out of the log. The full record that follows a gap is held (up to
:data:`CATCH_UP_WAIT_S`) until the answer is in, because that record settles who left: a
request it no longer holds must end as the log says (its tokens, its finish reason), not as
"left the engine", and one that came and went in between must be adopted and ended before it.

What is folded in with that record (:meth:`CatchUp.take`) is exactly what the watch missed:
the ends tagged after the record it read last and up to this one, less those this record
carries itself. Ends tagged after it come in later records (or in the next catch-up);
:class:`~stepview.engine.watch.link.watched_core.WatchedCore` ends each request once whatever
repeats it. A plug-in without the log (an older one) never answers: after one wait for
nothing, the watch stops holding records for it and counts what it lost as before.
"""

from __future__ import annotations

import logging
import time
from typing import NamedTuple

from stepview.engine.records.catch_up import CatchUpAnswer, LoggedEnd
from stepview.engine.records.channel import FactsSubscriber
from stepview.engine.records.entries import RecordStream
from stepview.engine.records.facts import StepFacts

log = logging.getLogger(__name__)

# How long the full record after a gap waits for the log's answer (monotonic seconds), and
# how often the question is asked again meanwhile (an answer is dropped like any message
# for a subscriber whose queue is full).
CATCH_UP_WAIT_S = 5.0
ASK_AGAIN_S = 1.0


class Caught(NamedTuple):
    """What the log says the watch missed before one full record."""

    logged: list[LoggedEnd]  # ends it kept, oldest first, to adopt and end
    missing: list[str]  # core ids of ends that fell out of it
    complete: bool  # every end after the point asked from is in one of the two


class CatchUp:
    """One engine core's question to the log, its answer, and the full record that waits."""

    def __init__(self, subscriber: FactsSubscriber) -> None:
        self._subscriber = subscriber
        self.after: tuple[float, int] | None = None  # (core_started, seq) asked after
        self.answer: CatchUpAnswer | None = None
        self._asked_at = 0.0
        self._wait_until: float | None = None
        self.answered = False  # an answer ever came from this plug-in
        self.unanswered = False  # waited once for nothing: a plug-in without the log

    def want(self, stream: RecordStream) -> None:
        """Ask when records were missed and no question is open (one at a time: the next
        waits until the full record of this one is read)."""
        missed = stream.missed
        if missed is None or self.after is not None:
            return
        stream.missed = None
        self.after, self.answer = missed, None
        self._ask()

    def _ask(self) -> None:
        assert self.after is not None
        self._asked_at = time.monotonic()
        self._subscriber.ask_catch_up(self.after[1])

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
        if facts.core_started != after[0] or facts.seq <= after[1]:
            return False
        now = time.monotonic()
        if self._wait_until is None:
            self._wait_until = now + CATCH_UP_WAIT_S
        if now >= self._wait_until:
            self.unanswered = not self.answered
            log.warning("stepview: no answer from the log of ends at %s in %.0f s: requests "
                        "that came and went in the records lost are counted unseen",
                        self._subscriber.address, CATCH_UP_WAIT_S)  # fmt: skip
            return False
        if now - self._asked_at >= ASK_AGAIN_S:
            self._ask()
        return True

    def take(self, facts: StepFacts) -> Caught | None:
        """What to fold in with the full record ``facts`` (read now); ``None``: nothing
        answered for it. Closes the question either way (a record after the point asked)."""
        after = self.after
        if after is None or not facts.full or facts.seq <= after[1]:
            return None
        answer = self.answer
        self.after, self.answer, self._wait_until = None, None, None
        self._subscriber.unask()
        core = after[0]
        if answer is None or answer.core_started != core or facts.core_started != core:
            return None  # none came, or from another engine core (whose tags start over)
        seq, since = facts.seq, after[1]
        carried = {end.req_id for end in facts.ended}
        logged = [e for e in answer.ends if since < e.tag <= seq and e.end.req_id not in carried]
        missing = answer.missing
        tags = answer.missing_tags
        if len(tags) == len(missing):  # those after ``seq`` are not this gap's (see the field)
            pairs = zip(missing, tags, strict=True)
            missing = [core_id for core_id, tag in pairs if since < tag <= seq]
        log.info("stepview: caught up on records %d-%d from %s's log of ends: %d ended, "
                 "%d fell out of it", since + 1, seq, self._subscriber.address, len(logged),
                 len(missing))  # fmt: skip
        return Caught(logged, missing, answer.known_after <= since)
