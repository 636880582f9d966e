"""The plug-in's log of what ended: bounded, ordered, what falls out said; fed by the capture.

The log alone (no engine, no socket): its bounds by count and by bytes, its answers from a
point on, the ids of what fell out, and what it says after a pause. Then the capture over
a fake scheduler: each ending logged with the seq of the record that carries it, with what a
watch that never saw the request needs, and logged on while the last watch's link is down.
"""

from __future__ import annotations

import pytest

from stepview.engine.plugin.end_log import FALLEN_IDS, EndLog
from stepview.engine.records.catch_up import CatchUpAnswer, decode_answer
from stepview.engine.records.facts import EndedFacts
from tests.engine.plugin.fake_scheduler import FakeRequest, FakeScheduler, ListSink, _output

pytestmark = pytest.mark.engine  # the fakes' statuses are vLLM's RequestStatus


def _request(request_id: str, prompt: int = 4, arrival: float = 5.0) -> FakeRequest:
    from vllm.v1.request import RequestStatus as RS

    return FakeRequest(
        RS.FINISHED_LENGTH_CAPPED,
        prompt,
        prompt + 2,
        num_output_tokens=2,
        output_token_ids=[1, 2],
        prompt_token_ids=list(range(100, 100 + prompt)),
        request_id=request_id,
        arrival_time=arrival,
    )


def _ended(request_id: str, tokens: int = 2) -> EndedFacts:
    return EndedFacts(request_id, tokens, list(range(tokens)), "length")


def _log_of(log: EndLog, tag: int, request_id: str, prompt: int = 4) -> None:
    log.add(tag, _request(request_id, prompt), _ended(request_id), 7.0, 9.0)


def _answer(log: EndLog, after: int) -> CatchUpAnswer:
    return decode_answer(log.answer(after))


def test_the_log_keeps_the_newest_ends_in_order_within_its_count() -> None:
    log = EndLog(max_ends=3)
    for tag, request_id in enumerate("abcde", start=1):
        _log_of(log, tag, f"{request_id}-1")
    assert len(log) == 3 and log.dropped == 2
    answer = _answer(log, 0)
    assert [e.end.req_id for e in answer.ends] == ["c-1", "d-1", "e-1"]
    assert answer.missing == ["a-1", "b-1"]  # fell out: only their ids are left
    assert answer.missing_tags == [1, 2]  # and the records that carried their ends
    assert answer.known_after == 0 and answer.upto == 5 and answer.core_started == 7.0
    # From a point on: only what ended in the records after it.
    later = _answer(log, 3)
    assert [(e.tag, e.end.req_id) for e in later.ends] == [(4, "d-1"), (5, "e-1")]
    assert later.missing == []
    assert _answer(log, 5).ends == []


def test_the_log_keeps_what_a_watch_that_never_saw_the_request_needs() -> None:
    log = EndLog()
    req = _request("x-1", prompt=3, arrival=4.5)
    log.add(2, req, _ended("x-1", 2), 7.0, 9.5, cached=16, times=(5.0, 5.5))
    (logged,) = _answer(log, 1).ends
    assert logged.tag == 2 and logged.ended_at == 9.5
    request = logged.request
    assert request.intro is not None and request.intro.prompt_token_ids == [100, 101, 102]
    assert (request.num_prompt_tokens, request.arrival_time, request.max_tokens) == (3, 4.5, 16)
    assert (request.num_cached_tokens, request.scheduled_at, request.first_token_at) == (
        16,
        5.0,
        5.5,
    )
    assert logged.end == _ended("x-1", 2)


def test_the_log_is_bounded_by_bytes_too_and_never_empties_itself_for_one_big_end() -> None:
    probe = EndLog()
    _log_of(probe, 1, "p-1", prompt=1000)
    one = probe.bytes  # a 1000-token prompt: ~3 bytes a token in msgpack
    assert 2000 < one < 4000
    log = EndLog(max_ends=100, max_bytes=int(one * 2.5))
    for tag in range(1, 6):
        _log_of(log, tag, f"r{tag}-1", prompt=1000)
    assert len(log) == 2 and log.bytes <= log.max_bytes
    assert [e.end.req_id for e in _answer(log, 0).ends] == ["r4-1", "r5-1"]
    tiny = EndLog(max_ends=100, max_bytes=10)  # smaller than any end: the newest stays
    _log_of(tiny, 1, "a-1")
    _log_of(tiny, 2, "b-1")
    assert [e.end.req_id for e in _answer(tiny, 0).ends] == ["b-1"]


def test_when_even_the_ids_fall_out_or_the_log_paused_answers_say_from_when_they_are_whole() -> (
    None
):
    log = EndLog(max_ends=1)  # FALLEN_IDS ids kept of what fell out
    for tag in range(1, FALLEN_IDS + 4):
        _log_of(log, tag, f"r{tag}-1")
    answer = _answer(log, 0)  # r1 .. r7 fell out, r8 is held: r1 and r2's ids are gone too
    assert answer.missing == [f"r{tag}-1" for tag in range(3, FALLEN_IDS + 3)]
    assert answer.known_after == 2
    assert _answer(log, answer.known_after).known_after <= answer.known_after
    log.pause()  # nobody listened for the linger: emptied, and no more ends logged
    assert len(log) == 0 and log.bytes == 0 and not log.open
    paused = _answer(log, 7)
    assert paused.ends == [] and paused.known_after > 12  # whole from nowhere yet
    _log_of(log, 12, "n-1")  # the first end logged again: whole after 12 only
    assert _answer(log, 7).known_after == 12


def test_off_by_environment_and_sized_by_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPVIEW_END_LOG", "0")
    assert EndLog.from_env() is None
    monkeypatch.setenv("STEPVIEW_END_LOG", "500")
    monkeypatch.setenv("STEPVIEW_END_LOG_MB", "2")
    log = EndLog.from_env()
    assert log is not None and (log.max_ends, log.max_bytes) == (500, 2 << 20)
    monkeypatch.setenv("STEPVIEW_END_LOG", "many")
    log = EndLog.from_env()
    assert log is not None and log.max_ends == 20_000  # a bad value: the defaults, said once


def _running(request_id: str, *tokens: int) -> FakeRequest:
    from vllm.v1.request import RequestStatus as RS

    return FakeRequest(
        RS.RUNNING,
        2,
        2 + len(tokens),
        num_output_tokens=len(tokens),
        output_token_ids=list(tokens),
        prompt_token_ids=[7, 8],
        request_id=request_id,
    )


def _finish(scheduler: FakeScheduler, capture: object, request_id: str, token: int) -> None:
    """One update in which ``request_id`` gets its last token and finishes."""
    from vllm.v1.request import RequestStatus as RS

    step = {request_id: 1}
    before = capture.before_update(scheduler, _output(step))  # type: ignore[attr-defined]
    req = scheduler.requests[request_id]
    req.output_token_ids.append(token)
    req.num_output_tokens += 1
    req.status = RS.FINISHED_STOPPED
    del scheduler.requests[request_id]
    scheduler.finished_req_ids = {request_id}
    capture.after_update(scheduler, before, _output(step), {})  # type: ignore[attr-defined]


def test_the_capture_logs_each_ending_under_the_seq_of_the_record_that_carries_it() -> None:
    from stepview.engine.plugin.capture import CoreCapture

    scheduler = FakeScheduler({"a-1": _running("a-1", 50), "b-1": _running("b-1", 60)})
    scheduler.counts = (2, 0)
    capture = CoreCapture(scheduler)
    sink = ListSink()
    sink.end_log = log = EndLog()  # type: ignore[attr-defined]
    log.open = True  # (the publisher opens it while someone listens)
    capture.sink = sink
    capture.after_schedule(scheduler, _output({"a-1": 1, "b-1": 1}))
    _finish(scheduler, capture, "a-1", 51)
    capture.after_schedule(scheduler, _output({"b-1": 1}, finished=["a-1"]))
    carried = sink.records[-1]
    assert [e.req_id for e in carried.ended] == ["a-1"]
    (logged,) = _answer(log, 0).ends
    assert logged.tag == carried.seq and logged.end == carried.ended[0]
    assert logged.request.intro is not None and logged.request.intro.prompt_token_ids == [7, 8]
    assert log.core_started == capture.started
    # The last watch's link drops: no record is built, but the log goes on for the linger.
    sink.want = False
    capture.after_schedule(scheduler, _output({"b-1": 1}))
    _finish(scheduler, capture, "b-1", 61)
    assert len(sink.records) == 2
    logged_b = _answer(log, carried.seq).ends
    assert [(e.tag, e.end.req_id, e.end.output_token_ids) for e in logged_b] == [
        (carried.seq + 1, "b-1", [60, 61])  # the tag of the next record, whenever it comes
    ]
    # Past the linger (the publisher closed the log): nothing copied, nothing logged.
    log.pause()
    scheduler.requests["c-1"] = _running("c-1", 70)
    assert capture.before_update(scheduler, _output({"c-1": 1})) is None
