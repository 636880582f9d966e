"""The catch-up exchange on plain zmq (no vLLM): a question as a subscription, one answer.

A real publisher and real subscribers in this process, on an ipc socket: the watch that asks
gets the ends logged after the record it names, under its own question's topic, and nobody
else does; a plug-in with its log off still answers (with nothing), so no watch waits for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import msgspec
import pytest

from stepview.engine.plugin.publisher import FactsPublisher
from stepview.engine.records.catch_up import CatchUpAnswer, asked_after, question_topic
from stepview.engine.records.channel import FactsSubscriber
from stepview.engine.records.facts import EndedFacts, StepFacts


def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)  # polling: zmq's state is read, not waited on


def _record(seq: int) -> StepFacts:
    return StepFacts(seq, seq, 100.0 + seq, 1.0, 0, seq, True, 2048, 0, 0, 32, 0, 0, 90, 100, 16,
                     [], [], [])  # fmt: skip


def _req(request_id: str) -> SimpleNamespace:
    """What the log reads of vLLM's request."""
    return SimpleNamespace(
        request_id=request_id,
        num_prompt_tokens=2,
        num_computed_tokens=3,
        num_preemptions=0,
        arrival_time=50.0,
        priority=0,
        max_tokens=8,
        lora_request=None,
        prompt_token_ids=[5, 6],
        sampling_params=None,
    )


@pytest.fixture
def address(tmp_path: Path) -> str:
    return f"ipc://{tmp_path / 'facts.sock'}"


@pytest.fixture
def pair(address: str) -> Iterator[tuple[FactsPublisher, FactsSubscriber, FactsSubscriber]]:
    """A publisher and two subscribers, both receiving its records."""
    publisher = FactsPublisher(address)
    asking, other = FactsSubscriber(address), FactsSubscriber(address)
    try:
        got: dict[int, list[StepFacts]] = {0: [], 1: []}

        def both_receive() -> bool:
            publisher.wanted()
            publisher.deliver(_record(1))
            for i, sub in enumerate((asking, other)):
                got[i] += sub.poll()
            return bool(got[0] and got[1])

        _until(both_receive)  # from here on, both subscriptions are in
        yield publisher, asking, other
    finally:
        asking.close()
        other.close()
        publisher.close()


def _answered(publisher: FactsPublisher, subscriber: FactsSubscriber) -> CatchUpAnswer:
    def came() -> bool:
        publisher.wanted()  # (the engine core reads its subscriptions when it steps)
        subscriber.poll()
        return bool(subscriber.answers)

    _until(came)
    (answer,) = subscriber.answers
    subscriber.answers.clear()
    return answer


def test_the_watch_that_asks_gets_the_ends_after_its_record_and_nobody_else_does(
    pair: tuple[FactsPublisher, FactsSubscriber, FactsSubscriber],
) -> None:
    publisher, asking, other = pair
    log = publisher.end_log
    assert log is not None  # on by default
    log.open, log.core_started = True, 1.0
    for tag, request_id in ((2, "a-1"), (3, "b-1"), (4, "c-1")):
        log.add(tag, _req(request_id), EndedFacts(request_id, 1, [9], "stop"), 1.0, 60.0)
    asking.ask_catch_up(2)
    answer = _answered(publisher, asking)
    assert (answer.after, answer.upto, answer.known_after, answer.core_started) == (2, 4, 0, 1.0)
    assert [(e.tag, e.end.req_id) for e in answer.ends] == [(3, "b-1"), (4, "c-1")]
    assert answer.ends[0].request.intro is not None
    assert answer.ends[0].request.intro.prompt_token_ids == [5, 6]
    # The other watch got neither the answer nor anything taken for a record.
    publisher.deliver(_record(2))  # a record both receive: what came before it has come
    _until(lambda: bool(other.poll()))
    assert other.answers == [] and other.bad_records == 0
    # Asking again (an answer can be dropped like a record) is answered again.
    asking.ask_catch_up(3)
    assert [e.end.req_id for e in _answered(publisher, asking).ends] == ["c-1"]
    asking.unask()


def test_a_plugin_with_its_log_off_answers_with_nothing(
    address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEPVIEW_END_LOG", "0")
    publisher = FactsPublisher(address)
    subscriber = FactsSubscriber(address)
    try:
        assert publisher.end_log is None
        subscriber.ask_catch_up(5)
        answer = _answered(publisher, subscriber)
        assert answer.core_started == 0.0 and answer.ends == [] and answer.after == 5
    finally:
        subscriber.close()
        publisher.close()


def test_question_topics_never_prefix_one_another_and_junk_is_no_question() -> None:
    five, fifty = question_topic(b"ab12cd34", 5), question_topic(b"ab12cd34", 50)
    assert not fifty.startswith(five)  # a watch asking after 5 never gets the answer to 50
    assert asked_after(five) == 5 and asked_after(fifty) == 50
    junk = [b"x/", b"x/1", b"x/-1.", b"9" * 40 + b"."]
    for topic in [b"stepview.facts.2", *(b"stepview.catchup.1/" + j for j in junk)]:
        assert asked_after(topic) is None


def test_the_stream_says_after_which_record_records_were_missed() -> None:
    from stepview.engine.records.stream import RecordStream

    asked: list[int] = []
    stream = RecordStream(lambda: asked.append(1))

    def change(seq: int, core: float = 1.0) -> StepFacts:
        return msgspec.structs.replace(_record(seq), full=False, core_started=core)

    assert stream.accept(_record(1)) and stream.accept(change(2)) and stream.missed is None
    assert not stream.accept(change(5))  # a gap: records 3 and 4 never came
    assert stream.missed == (1.0, 2) and asked == [1]
    assert stream.accept(_record(6)) and stream.missed == (1.0, 2)  # until the watch takes it
    stream.missed = None
    assert stream.accept(_record(7)) and stream.missed is None  # a full record that follows
    assert stream.accept(_record(9)) and stream.missed == (1.0, 7)  # one that does not
    stream.missed = None
    stream.reset()  # the link dropped
    assert stream.missed == (1.0, 9)
    stream.missed = None
    assert stream.accept(msgspec.structs.replace(_record(1), core_started=2.0))
    assert stream.missed is None  # another engine core: nothing of the old one to catch up on
