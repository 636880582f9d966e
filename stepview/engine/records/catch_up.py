"""Catching up: how a watch that lost records gets back the requests that ended in them.

Records say what changed (:mod:`~stepview.engine.records.facts`), and a subscriber too slow
to take them loses some (zmq drops them past its high-water mark; a stalled watch's link is
dropped by the heartbeats). The full record it then gets says who is left, not who came and
went in between: those requests' intros and ends were only in the lost records. So the
plug-in keeps a bounded log of what ended (:class:`LoggedEnd`: the request as a first record
would introduce it, and how it ended) and answers a watch that asks for the ends after the
last record it read.

The question is a zmq subscription, so it needs no second socket: the watch subscribes to
:func:`question_topic` (:data:`CATCH_UP_TOPIC`, a name of its own, the last ``seq`` it read);
XPUB passes every subscription up to the plug-in (``XPUB_VERBOSE``), which sends one
:class:`CatchUpAnswer` under that very topic, so only that subscriber receives it (the facts
topic is no prefix of it, and the name tells two watches apart). The watch then unsubscribes.

Each logged end is tagged with the ``seq`` of the record that carries it, or would have (one
built while nobody listened carries none: the tag is the next record's), so "after ``seq``"
is exactly what a watch that read up to ``seq`` can have missed. Plain data, no vLLM: both
ends import it.
"""

from __future__ import annotations

import msgspec

from stepview.engine.records.facts import EndedFacts, RequestFacts

# The prefix of a question (and of its answer). Neither it nor FACTS_TOPIC is a prefix of the
# other: a watch subscribed to the records never receives another's answer, and a question
# is never taken for a subscription to the records.
CATCH_UP_TOPIC = b"stepview.catchup.1/"

# The plug-in's log: how many ends it keeps at most, and how many MB their encoded form may
# take at most (whichever bound is reached first); 0 ends switches the log off.
END_LOG_ENV = "STEPVIEW_END_LOG"
END_LOG_MB_ENV = "STEPVIEW_END_LOG_MB"
END_LOG_ENDS = 20_000
END_LOG_MB = 64
# How long the plug-in goes on logging ends after its last subscriber left: a watch whose
# link was dropped (stalled past the heartbeats, a network blip) and that is back within it
# loses nothing. Past it, ends are not logged (the work of logging them stops with it).
END_LOG_LINGER_S = 60.0


class LoggedEnd(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One request (sample) that ended, as a watch that never saw it needs it.

    ``request`` is the request as the first record naming it would have carried it (its
    intro, prompt length, arrival, ``max_tokens``, vLLM's scheduled and first-token times
    where the plug-in saw them; no token tail: every output token is in ``end``). ``tag``:
    the ``seq`` of the record that carries the end (see the module docstring); ``ended_at``:
    the server's wall clock when the plug-in saw it end.
    """

    tag: int
    request: RequestFacts
    end: EndedFacts
    ended_at: float = 0.0
    # Append new fields here, each with a default.


class CatchUpAnswer(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """The plug-in's answer to "what ended after record ``after``?".

    ``ends``: every logged end tagged after ``after``, oldest first; ``missing``: the ids of
    those that had fallen out of the log (its bounds), which only their count and the watch's
    own view can still account for. ``known_after``: ends tagged after it are all in ``ends``
    or ``missing``; one at or before it may be in neither (the log was off: nobody listened
    for longer than the linger, or even the ids of what fell out were dropped). ``upto``: the
    newest tag logged when the answer was made. ``core_started`` tells a restarted engine
    core (whose tags start over) from the one the watch read.
    """

    core_started: float
    after: int
    upto: int
    known_after: int
    ends: list[LoggedEnd] = []
    missing: list[str] = []
    # The tag of each of ``missing``, in the same order (a plug-in before them sends none):
    # a watch counts only those of the records it lost, up to the full record it reads
    # next; later ones come in later records, read or missed and asked for again.
    missing_tags: list[int] = []
    # Append new fields here, each with a default.


def question_topic(name: bytes, after: int) -> bytes:
    """The subscription a watch called ``name`` (hex) asks with: the ends after record
    ``after``. It ends with a dot, so that no question is a prefix of another's answer."""
    return b"%s%s/%d." % (CATCH_UP_TOPIC, name, after)


def asked_after(topic: bytes) -> int | None:
    """The ``after`` of a question's topic; ``None`` for anything else (never raises: it
    runs inside vLLM's engine core, on whatever a subscriber sent)."""
    if not topic.startswith(CATCH_UP_TOPIC) or not topic.endswith(b"."):
        return None
    _, slash, after = topic[len(CATCH_UP_TOPIC) : -1].rpartition(b"/")
    if not slash or not after.isdigit() or len(after) > 18:
        return None
    return int(after)


def answer_payload(message: bytes) -> memoryview:
    """An answer's bytes past its topic (the question's, which ends at its first dot past
    :data:`CATCH_UP_TOPIC`)."""
    return memoryview(message)[message.index(b".", len(CATCH_UP_TOPIC)) + 1 :]


_ENCODER = msgspec.msgpack.Encoder()
_ANSWER = msgspec.msgpack.Decoder(CatchUpAnswer)


def encode_logged(logged: LoggedEnd) -> bytes:
    """One log entry's wire form: what the log keeps (compact), sent as is in an answer."""
    return _ENCODER.encode(logged)


class _EncodedAnswer(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """:class:`CatchUpAnswer` with its ends already encoded (the log keeps them so), for
    the plug-in: the same fields, in the same order."""

    core_started: float
    after: int
    upto: int
    known_after: int
    ends: list[msgspec.Raw]
    missing: list[str]
    missing_tags: list[int]


def encode_answer(
    core_started: float,
    after: int,
    upto: int,
    known_after: int,
    ends: list[bytes],
    missing: list[str],
    missing_tags: list[int],
) -> bytes:
    """A :class:`CatchUpAnswer`'s wire form from log entries in theirs (no decoding them)."""
    raw = [msgspec.Raw(end) for end in ends]
    answer = _EncodedAnswer(core_started, after, upto, known_after, raw, missing, missing_tags)
    return _ENCODER.encode(answer)


def decode_answer(payload: bytes | memoryview) -> CatchUpAnswer:
    """An answer from its wire form; raises ``msgspec.DecodeError`` on anything else."""
    return _ANSWER.decode(payload)
