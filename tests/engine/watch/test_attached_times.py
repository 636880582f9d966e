"""vLLM's own scheduled / first-token times, read from the records of a watched engine core.

The plug-in puts them in its records on the record's clock (the server's wall clock); the
watch hands them to the ledger as seconds before the step that reports them, so queue,
prefill and decode split where vLLM splits them, whatever the two machines' clocks say.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from stepview.engine.driver.ledger import RequestLedger
from stepview.engine.records.channel import FactsSubscriber
from stepview.engine.records.entries import merge_records
from stepview.engine.records.facts import (
    EndedFacts,
    RequestFacts,
    StepFacts,
    decode_facts,
    encode_facts,
)
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.engine.watch.link.core_steps import CoreStep, merged
from stepview.engine.watch.link.watched_core import WatchedCore
from stepview.model.address import plugin_records
from stepview.model.engine_api import ArrivedRequest, StepResult
from stepview.model.sampling import SamplingSpec
from tests.engine.watch.attach_helpers import NOW, Server, next_step, record, request

SKEW = -1234.5  # this machine's clock against the server's: it must not matter


@pytest.fixture
def engine(server: Server) -> Iterator[AttachedEngine]:
    e = AttachedEngine(plugin_records(server.address), clock=lambda: NOW + SKEW)
    server.wait_subscribed()
    yield e
    e.shutdown()


def timed(req: RequestFacts, scheduled: float = 0.0, first: float = 0.0) -> RequestFacts:
    return msgspec.structs.replace(req, scheduled_at=scheduled, first_token_at=first)


def test_a_record_without_the_times_still_decodes() -> None:
    """An older plug-in's record (no trailing time fields) reads as 'no times'."""
    facts = record(1, timed(request("a-0123abcd"), NOW + 0.001, NOW + 0.002))
    again = decode_facts(encode_facts(facts))
    assert (again.requests[0].scheduled_at, again.requests[0].first_token_at) == (
        NOW + 0.001,
        NOW + 0.002,
    )
    as_list = msgspec.msgpack.decode(encode_facts(facts))
    before = RequestFacts.__struct_fields__.index("scheduled_at")  # (later fields appended)
    as_list[18][0] = as_list[18][0][:before]  # the request, as a plug-in before these sent it
    as_list[20] = [
        msgspec.msgpack.decode(msgspec.msgpack.encode(EndedFacts("b", 1, [5], "stop")))[:-1]
    ]
    older = decode_facts(msgspec.msgpack.encode(as_list))
    assert (older.requests[0].scheduled_at, older.requests[0].first_token_at) == (0.0, 0.0)
    assert older.ended[0].first_token_at == 0.0 and older.ended[0].finish_reason == "stop"


def test_records_read_as_one_keep_the_times_either_carried() -> None:
    first = record(1, timed(request("a-0123abcd", computed=4), scheduled=NOW + 0.001))
    second = record(2, request("a-0123abcd", outputs=1, new=[7]), full=False)
    joined = merge_records(first, second).requests[0]
    assert (joined.scheduled_at, joined.first_token_at, joined.new_token_ids) == (
        NOW + 0.001,
        0.0,
        [7],
    )


def _apply(ledger_now: list[float], ledger: RequestLedger, result: StepResult) -> None:
    ledger_now[0] += 0.01
    ledger.apply(result, ledger_now[0])


def test_the_ledger_gets_vllms_times_as_seconds_before_the_step(
    server: Server, engine: AttachedEngine
) -> None:
    now = [100.0]
    ledger = RequestLedger(lambda: now[0])
    core_id = "cmpl-0123456789abcdef-0-0123abcd"
    # Record 1 (server time NOW + 0.01): scheduled at NOW + 0.004, a chunk of its prompt.
    server.send(record(1, timed(request(core_id, prompt=8, computed=4), scheduled=NOW + 0.004)))
    one = next_step(engine)
    assert not one.stamps  # no first token yet: the scheduled time is kept for it
    _apply(now, ledger, one)
    # Record 2 (NOW + 0.02): the rest of the prompt, the token made at NOW + 0.017.
    server.send(
        record(2, timed(request(core_id, outputs=1, new=[42]), first=NOW + 0.017), full=False)
    )
    two = next_step(engine)
    stamp = two.stamps["01234567"]
    assert stamp.scheduled_ago == pytest.approx(0.016, abs=1e-9)
    assert stamp.first_token_ago == pytest.approx(0.003, abs=1e-9)
    _apply(now, ledger, two)
    (view,) = ledger.active()
    t = view.timings
    assert t.first_token == pytest.approx(now[0] - 0.003, abs=1e-9)
    assert t.scheduled == pytest.approx(now[0] - 0.016, abs=1e-9)
    assert t.arrival < t.scheduled < t.first_token  # queue < TTFT: the prefill is not queue
    # Later records carry no times: the first token is dated once.
    server.send(record(3, request(core_id, outputs=2, new=[43]), full=False))
    three = next_step(engine)
    assert not three.stamps


def test_a_slow_read_counts_in_the_age_and_keeps_vllms_prefill(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver dates a step by the moment it gets it, less the step's age. The arrival is
    dated by the record that first names a request, vLLM's times by a later one: a read that
    took 50 ms (many records, or a thread waiting for the GIL on a busy host) must count in
    its age, or that arrival comes out after vLLM's scheduled time and the prefill is cut to
    fit (a CI run showed 3.6 ms for vLLM's 14.4)."""
    clock = [NOW + SKEW]  # no delivery delay: this machine's clock moves with the records
    engine = AttachedEngine(plugin_records(server.address), clock=lambda: clock[0])
    server.wait_subscribed()
    read = WatchedCore.read
    slow = [0.05]

    def slow_read(core: WatchedCore, *args: Any, **kwargs: Any) -> CoreStep:
        got = read(core, *args, **kwargs)
        clock[0] += slow.pop() if slow else 0.0  # the first read takes 50 ms
        return got

    monkeypatch.setattr(WatchedCore, "read", slow_read)

    def driver_time(result: StepResult) -> float:  # the driver's clock, less the age
        return 100.0 + (clock[0] - NOW - SKEW) - result.age

    ledger = RequestLedger(lambda: 0.0)
    core_id = "cmpl-00112233445566ff-0-0123abcd"
    named = msgspec.structs.replace(request(core_id, computed=4), arrival_time=NOW + 0.008)
    try:
        clock[0] = NOW + SKEW + 0.01
        server.send(record(1, timed(named, scheduled=NOW + 0.009)))  # server time NOW + 0.01
        one = next_step(engine)
        assert one.age == pytest.approx(0.05, abs=1e-9)  # the read's 50 ms
        ledger.apply(one, driver_time(one))
        clock[0] = NOW + SKEW + 0.07  # record 2 read 50 ms after it was made, quickly
        server.send(
            record(2, timed(request(core_id, outputs=1, new=[42]), first=NOW + 0.017), full=False)
        )
        two = next_step(engine)
        ledger.apply(two, driver_time(two))
    finally:
        engine.shutdown()
    (view,) = ledger.active()
    t = view.timings
    assert t.scheduled is not None and t.first_token is not None
    assert t.first_token - t.scheduled == pytest.approx(0.008, abs=1e-9)  # vLLM's prefill
    assert t.scheduled - t.arrival == pytest.approx(0.001, abs=1e-9)  # and vLLM's queue


def test_records_read_in_one_step_keep_each_arrivals_own_time() -> None:
    """Records read together (the view catching up, or several engine cores) make one step
    dated by the newest; an arrival told by an older one keeps its own time."""

    def core_step(arrived: ArrivedRequest, age: float) -> CoreStep:
        return CoreStep({}, [], [arrived], [], 0, 0, 0, None, age, {})

    spec = SamplingSpec()
    older = core_step(ArrivedRequest("a", "(8 prompt tokens)", spec, 0.002), age=0.030)
    newer = core_step(ArrivedRequest("b", "(8 prompt tokens)", spec, 0.001), age=0.010)
    step = merged([older, newer])
    assert step.age == 0.010
    assert [a.waited for a in step.arrived] == pytest.approx([0.022, 0.001], abs=1e-12)


def test_a_first_token_that_was_also_the_last_is_dated_by_its_end(
    server: Server, engine: AttachedEngine
) -> None:
    core_id = "cmpl-fedcba9876543210-0-0123abcd"
    server.send(record(1, timed(request(core_id, prompt=8, computed=8), scheduled=NOW + 0.002)))
    next_step(engine)
    end = EndedFacts(core_id, 1, [9], "length", None, NOW + 0.015)
    server.send(record(2, ended=[end], finished=[core_id], full=False))
    two = next_step(engine)
    stamp = two.stamps["fedcba98"]
    assert stamp.scheduled_ago == pytest.approx(0.018, abs=1e-9)
    assert stamp.first_token_ago == pytest.approx(0.005, abs=1e-9)


def test_a_record_that_came_during_the_read_does_not_make_later_steps_older(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's clock against this one is the smallest lag seen, taken when records are
    read: a record made after the read began (a busy machine reading for a few ms) must not
    make that lag negative, which would age every later step by it, and date every event's
    ``engine_time`` before its step (a run showed 6 ms early)."""
    clock = [NOW + SKEW]
    engine = AttachedEngine(plugin_records(server.address), clock=lambda: clock[0])
    server.wait_subscribed()
    poll = FactsSubscriber.poll
    slow = [0.02]

    def slow_poll(subscriber: FactsSubscriber, *args: Any, **kwargs: Any) -> list[StepFacts]:
        got = poll(subscriber, *args, **kwargs)
        if got and slow:  # the first read took 20 ms, and the record came in the middle of it
            clock[0] += slow.pop()
        return got

    monkeypatch.setattr(FactsSubscriber, "poll", slow_poll)
    try:
        clock[0] = NOW + SKEW
        server.send(record(1, request("a-0123abcd")))  # made at NOW + 0.01, within the read
        one = next_step(engine)
        clock[0] = NOW + SKEW + 0.02 + 0.015  # record 2, made at NOW + 0.02, read 15 ms later
        server.send(record(2, request("a-0123abcd", outputs=1, new=[4]), full=False))
        two = next_step(engine)
    finally:
        engine.shutdown()
    assert one.age == pytest.approx(0.0, abs=1e-9)  # the first record sets the lag
    assert two.age == pytest.approx(0.005, abs=1e-9)  # 15 ms against the first's 10: 5 ms late
