"""A gap whose answer from the log of ends comes late, or is never answered, loses no request.

The watch is the real attached engine over a real publisher (tests/engine/watch/attach_helpers):
the publisher answers a question only when it reads its subscriptions, as an engine core does
when it steps, so holding that back plays an answer dropped again and again on a busy server
(zmq drops it like any message for a watch whose queue is full). After the wait the full
record is read all the same; the answer that comes later is folded in with the next record:
what came and went in the gap is shown then, what the watch had already ended is not shown
twice, and a plug-in that answered once is held for again at the next gap.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from stepview.engine.records.facts import EndedFacts, StepFacts
from stepview.engine.watch.link import catching_up
from stepview.engine.watch.link.attached import AttachedEngine
from tests.engine.watch.attach_helpers import Server, Watcher, record, request, wait_until

STARTED = 1.0  # the records' engine core (attach_helpers.record)


def _ended_in_the_log(server: Server, tag: int, core_id: str, tokens: list[int]) -> None:
    """The plug-in's log holds ``core_id``'s end, carried by record ``tag`` (lost)."""
    publisher = server.publisher
    assert publisher is not None and publisher.end_log is not None
    req = SimpleNamespace(
        request_id=core_id,
        num_prompt_tokens=4,
        num_computed_tokens=4 + len(tokens),
        num_preemptions=0,
        arrival_time=50.0,
        priority=0,
        max_tokens=len(tokens),
        lora_request=None,
        prompt_token_ids=[5, 6, 7, 8],
        sampling_params=None,
    )
    end = EndedFacts(core_id, len(tokens), tokens, "length")
    publisher.end_log.add(tag, req, end, STARTED, 60.0)


def _b_ends_in_record_3() -> StepFacts:
    """A record the watch gets but cannot read (record 2 was lost): b's end, no intro."""
    ended = [EndedFacts("b-0123abcd", 2, [7, 8], "length")]
    return record(3, finished=["b-0123abcd"], ended=ended, full=False)


def _answered(engine: AttachedEngine) -> None:
    """Until the watch holds the log's answer."""
    catch_up = engine._cores[0].catch_up

    def came() -> bool:
        engine.has_unfinished()  # (the watch reads its sockets)
        return catch_up.answer is not None

    wait_until(came)


def test_an_answer_after_the_wait_shows_the_gaps_requests_each_once(
    server: Server,
    engine: AttachedEngine,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(catching_up, "CATCH_UP_WAIT_S", 0.2)
    caplog.set_level(logging.INFO, logger="stepview.engine.watch")
    watcher = Watcher(engine)
    server.send(record(1, request("a-0123abcd")))
    watcher.step()
    _ended_in_the_log(server, 3, "b-0123abcd", [7, 8])  # came and went in records 2-4
    _ended_in_the_log(server, 4, "a-0123abcd", [9])  # ended there: the full record says left
    _ended_in_the_log(server, 5, "d-0123abcd", [6])  # came in 4, ended in the full record's step
    d_ends = EndedFacts("d-0123abcd", 1, [6], "length")
    full = record(5, request("c-0123abcd"), finished=["d-0123abcd"], ended=[d_ends])
    server.send(_b_ends_in_record_3(), full)  # records 2 and 4 never came
    result = watcher.step()  # held for the answer, which does not come: read all the same
    assert [e.request_id for e in result.ended] == ["a"]
    watched = engine._cores[0]
    assert watched.catch_up.unanswered and watched.catch_up.after is not None  # still asked
    assert "b" not in watcher.finished() and engine.link().unseen == 0  # b, d: for the answer
    with server.stepping():  # the plug-in reads its subscriptions: the answer comes now
        _answered(engine)
    server.send(record(6, request("c-0123abcd", outputs=1, new=[4]), full=False))
    watcher.step()
    finished = watcher.finished()
    (completion,) = finished["b"].completions  # shown, as the log says it ended
    assert list(completion.token_ids) == [7, 8] and completion.finish_reason == "length"
    assert sorted(finished) == ["a", "b", "d"]  # a ended once (not adopted again)
    assert engine.link().unseen == 0
    assert watched.catch_up.answered and not watched.catch_up.unanswered
    assert watched.catch_up.after is None  # the question is closed
    assert any("caught up late on records 2-5" in r.getMessage() for r in caplog.records)
    # The next gap's full record waits for the answer again: the plug-in has the log.
    monkeypatch.setattr(catching_up, "CATCH_UP_WAIT_S", 60.0)
    server.send(record(9, request("c-0123abcd", outputs=1)))  # records 7 and 8 never came
    wait_until(lambda: engine.has_unfinished() or watched.catch_up.after is not None)
    assert watched.catch_up.holds(record(9, request("c-0123abcd", outputs=1)))


def test_gaps_never_answered_are_given_up_and_said(
    server: Server,
    engine: AttachedEngine,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A plug-in without the log (an older one) never answers: the gaps read past are asked
    about for :data:`~stepview.engine.watch.link.catching_up.LATE_ANSWER_S`, then given up,
    the records whose requests went unseen named, and those the watch knows of counted."""
    monkeypatch.setattr(catching_up, "CATCH_UP_WAIT_S", 0.0)
    monkeypatch.setattr(catching_up, "LATE_ANSWER_S", 0.0)
    watcher = Watcher(engine)
    server.send(record(1, request("a-0123abcd")))
    watcher.step()
    server.send(_b_ends_in_record_3(), record(5, request("a-0123abcd")))  # 2 and 4 lost
    watcher.step()
    watched = engine._cores[0]
    assert watched.catch_up.after is not None and engine.link().unseen == 0
    engine.has_unfinished()  # a read of the sockets: past the time allowed, given up
    assert watched.catch_up.after is None
    (said,) = [r.getMessage() for r in caplog.records if "cannot be asked" in r.getMessage()]
    assert "records 2-5" in said and "cannot be counted" in said
    assert engine.link().unseen == 1  # b, whose end came without its intro: counted
