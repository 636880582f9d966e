"""vLLM's own scheduled / first-token times, read from the records of a watched engine core.

The plug-in puts them in its records on the record's clock (the server's wall clock); the
watch hands them to the ledger as seconds before the step that reports them, so queue,
prefill and decode split where vLLM splits them, whatever the two machines' clocks say.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest

from stepview.engine.driver.ledger import RequestLedger
from stepview.engine.records.entries import merge_records
from stepview.engine.records.facts import (
    EndedFacts,
    RequestFacts,
    decode_facts,
    encode_facts,
)
from stepview.engine.watch.attached import AttachedEngine
from stepview.model.engine_api import StepResult
from tests.engine.watch.attach_helpers import NOW, Server, next_step, record, request

SKEW = -1234.5  # this machine's clock against the server's: it must not matter


@pytest.fixture
def engine(server: Server) -> Iterator[AttachedEngine]:
    e = AttachedEngine(server.address, clock=lambda: NOW + SKEW)
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
    as_list[18][0] = as_list[18][0][:-2]  # the request, as a plug-in before these fields sent it
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


def test_an_arrival_dated_late_does_not_cut_vllms_prefill(
    server: Server, engine: AttachedEngine
) -> None:
    """The arrival is dated by the record that first names a request, vLLM's times by a later
    one. A driver that applied the first one late (its thread waiting for the GIL on a busy
    host: a CI run's failure) must still show vLLM's prefill; the arrival moves back."""
    ledger = RequestLedger(lambda: 0.0)
    core_id = "cmpl-00112233445566ff-0-0123abcd"
    named = msgspec.structs.replace(request(core_id, computed=4), arrival_time=NOW + 0.008)
    server.send(record(1, timed(named, scheduled=NOW + 0.009)))  # server time NOW + 0.01
    ledger.apply(next_step(engine), 100.10)  # applied 50 ms after it was read
    server.send(
        record(2, timed(request(core_id, outputs=1, new=[42]), first=NOW + 0.017), full=False)
    )
    ledger.apply(next_step(engine), 100.105)  # 5 ms later, not the records' 10: on time
    (view,) = ledger.active()
    t = view.timings
    assert t.scheduled is not None and t.first_token is not None
    assert t.first_token - t.scheduled == pytest.approx(0.008, abs=1e-9)  # vLLM's prefill
    assert t.arrival == t.scheduled  # moved back to vLLM's scheduled time: no negative queue


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
