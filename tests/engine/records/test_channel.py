"""The plug-in's channel on plain zmq (no vLLM): records, subscriptions, a publisher that dies.

The publisher's side runs in this process where only its API matters, and in a child
process where dying matters (``kill -9`` leaves zmq no chance to say goodbye).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
import zmq
from zmq.utils.monitor import parse_monitor_message

from stepview.engine.own.core_link import PendingRecords
from stepview.engine.plugin import publisher as publisher_module
from stepview.engine.plugin.publisher import FactsPublisher
from stepview.engine.records.channel import ChannelState, FactsSubscriber
from stepview.engine.records.facts import (
    RequestFacts,
    StepFacts,
    decode_facts,
    encode_facts,
    split_internal_id,
)
from stepview.engine.records.request_states import CoreState
from stepview.model.address import zmq_endpoint
from tests.helpers import ROOT


def _facts(
    step: int, started: float = 1.0, requests: int = 2, iteration: int | None = None
) -> StepFacts:
    return StepFacts(
        step=step,
        iteration=step if iteration is None else iteration,
        time=100.0 + step,
        core_started=started,
        dp_rank=0,
        seq=step,
        full=True,
        token_budget=2048,
        prefill_tokens=10,
        decode_tokens=1,
        max_num_running_reqs=32,
        num_running=requests,
        num_waiting=0,
        kv_free_blocks=90,
        kv_total_blocks=100,
        block_size=16,
        preempted=[],
        finished=["gone-0123abcd"],
        requests=[
            RequestFacts(f"r{i}-0123abcd", CoreState.RUNNING, 10, 11, 1, 0, 1, 1, 0, 99.0, 0, 16)
            for i in range(requests)
        ],
    )


def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)  # polling: zmq's state is read, not waited on


def _lost(sub: FactsSubscriber) -> bool:
    """Poll (which reads zmq's monitor events) and tell whether the connection is down."""
    sub.poll()
    return sub.state is ChannelState.DISCONNECTED


@pytest.fixture
def address(tmp_path: Path) -> str:
    return f"ipc://{tmp_path / 'facts.sock'}"


@pytest.fixture
def subscriber(address: str) -> Iterator[FactsSubscriber]:
    sub = FactsSubscriber(address)
    yield sub
    sub.close()


# -- records ---------------------------------------------------------------------------------


class NewerRequest(RequestFacts, array_like=True, frozen=True, gc=False):
    """What a later plug-in may send: a field appended, with a default."""

    waiting_reason: str = ""


class NewerStep(StepFacts, array_like=True, frozen=True, gc=False):
    requests: list[NewerRequest]  # type: ignore[assignment]
    queue_depth: int = 0


def test_records_round_trip_and_evolve_by_appending_fields() -> None:
    facts = _facts(7)
    assert decode_facts(encode_facts(facts)) == facts
    # array_like: no field names on the wire.
    assert b"kv_free_blocks" not in encode_facts(facts)

    newer = NewerStep(
        **{f: getattr(facts, f) for f in StepFacts.__struct_fields__ if f != "requests"},
        requests=[NewerRequest(*msgspec.structs.astuple(r), "budget") for r in facts.requests],
        queue_depth=3,
    )
    # An older reader ignores the appended fields; a newer one fills them with defaults.
    assert decode_facts(msgspec.msgpack.encode(newer)) == facts
    old_read_by_new = msgspec.msgpack.decode(encode_facts(facts), type=NewerStep)
    assert old_read_by_new.queue_depth == 0
    assert old_read_by_new.requests[0].waiting_reason == ""
    with pytest.raises(msgspec.DecodeError):
        decode_facts(b"\x93\x01\x02")


def test_internal_ids_split_into_client_id_and_sample() -> None:
    assert split_internal_id("chat-7-0123abcd") == ("chat-7", None)
    assert split_internal_id("1_chat-7-0123abcd") == ("chat-7", 1)
    assert split_internal_id("no-suffix") == ("no-suffix", None)


def test_rank_addresses_follow_vllms_rule() -> None:
    assert zmq_endpoint("tcp://127.0.0.1:5557").for_rank(0).text == "tcp://127.0.0.1:5557"
    assert zmq_endpoint("tcp://127.0.0.1:5557").for_rank(3).text == "tcp://127.0.0.1:5560"
    assert zmq_endpoint("ipc:///tmp/sv.sock").for_rank(2).text == "ipc:///tmp/sv.sock_dp2"
    for bad in ("127.0.0.1:5557", "tcp://host", "udp://x:1"):
        with pytest.raises(ValueError):
            zmq_endpoint(bad).for_rank(1)


def test_records_are_matched_to_the_step_whose_outputs_are_read() -> None:
    pending = PendingRecords()
    assert pending.take(1) == [] and pending.take(None) == [] and pending.behind(1)
    # Steps 1-6; step 3 scheduled nothing (same iteration as step 2); iteration 5 never came.
    for step, iteration in ((1, 1), (2, 2), (3, 2), (4, 3), (5, 4), (6, 6)):
        pending.add(_facts(step, iteration=iteration))
    assert not pending.behind(6) and pending.behind(7)
    # Records say what changed: every one up to the step's is read, none skipped.
    assert [r.step for r in pending.take(2)] == [1, 2, 3]
    assert [r.step for r in pending.take(3)] == [4]
    assert [r.step for r in pending.take(5)] == [5]  # 5 never came: none of a later step
    pending.add(_facts(7, iteration=7))
    assert [r.step for r in pending.take(None)] == [6, 7]  # no iteration known: all of them
    assert pending.take(None) == []


# -- subscriptions ---------------------------------------------------------------------------


def _took_in_a_leaving(publisher: FactsPublisher, gone: zmq.Socket[bytes], address: str) -> None:
    """Return once the publisher has read whatever a subscriber's leaving made zmq say.

    ``gone`` (a monitor of the publisher's socket) reports the dropped connection; a read
    then has the socket answer its end of the pipe's teardown, and a probe subscribing to
    another topic only after that finishes its handshake after the teardown is done, so once
    the publisher's fold holds the probe's topic, an unsubscription the leaving caused (had
    there been one) was read before it. Needs ``SUBSCRIPTION_CHECK_S`` at 0 (every
    ``wanted()`` reads)."""
    assert gone.poll(10_000), "the publisher's socket never saw the subscriber go"
    assert parse_monitor_message(gone.recv_multipart())["event"] == zmq.EVENT_DISCONNECTED
    publisher.wanted()
    context = zmq.Context()
    probe = context.socket(zmq.SUB)
    try:
        probe.setsockopt(zmq.LINGER, 0)
        probe.setsockopt(zmq.SUBSCRIBE, PROBE_TOPIC)
        probe.connect(address)
        _until(lambda: publisher.wanted() is not None and PROBE_TOPIC in publisher._topics)
    finally:
        probe.close(0)
        context.term()


PROBE_TOPIC = b"probe: not a prefix of the records' topic"


def test_publisher_wants_records_only_while_someone_subscribes(
    address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(publisher_module, "SUBSCRIPTION_CHECK_S", 0.0)  # each wanted() reads
    publisher = FactsPublisher(address)
    gone = publisher._sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    try:
        assert not publisher.wanted()  # nobody exists who could have subscribed
        first = FactsSubscriber(address)
        _until(publisher.wanted)
        assert first.wait_connected(5.0)
        second = FactsSubscriber(address)
        assert second.wait_connected(5.0)
        publisher.deliver(_facts(1))
        _until(lambda: bool(first.poll()))
        first.close()  # one left: still wanted
        _took_in_a_leaving(publisher, gone, address)
        assert publisher.wanted()
        second.close()
        _until(lambda: not publisher.wanted())

        # A subscriber killed without a word: zmq reports its unsubscribe all the same.
        child = _child(f"""
            from stepview.engine.records.channel import FactsSubscriber
            import time
            sub = FactsSubscriber({address!r})
            sub.wait_connected(10)
            print("ready", flush=True)
            time.sleep(60)  # parked until the test kills it (its death is what is tested)
        """)
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
            _until(publisher.wanted)
        finally:
            child.kill()
            child.wait()
        _until(lambda: not publisher.wanted())
    finally:
        publisher._sock.disable_monitor()
        gone.close(0)
        publisher.close()


def test_a_late_subscriber_gets_the_next_record_whole(address: str) -> None:
    publisher = FactsPublisher(address)
    try:
        sub = FactsSubscriber(address)
        try:
            _until(publisher.wanted)
            publisher.deliver(_facts(5, requests=3))
            records: list[StepFacts] = []
            _until(lambda: bool(records.extend(sub.poll()) or records))
            assert [r.step for r in records] == [5]
            assert len(records[0].requests) == 3
            assert sub.state is ChannelState.CONNECTED
        finally:
            sub.close()
    finally:
        publisher.close()


def test_a_read_with_a_budget_leaves_the_rest_queued_for_the_next(address: str) -> None:
    """A watch far behind reads a bounded amount per call (at least one message), so that
    it hears a stop in between; nothing is lost, nothing reordered."""
    publisher = FactsPublisher(address)  # every=0: one message per record
    try:
        sub = FactsSubscriber(address)
        try:
            _until(publisher.wanted)
            for step in range(1, 6):
                publisher.deliver(_facts(step))
            calls: list[list[int]] = []

            def read_one() -> bool:
                calls.append([r.step for r in sub.poll(budget=0.0)])
                return sum(len(c) for c in calls) >= 5

            _until(read_one)
            assert [c for c in calls if c] == [[1], [2], [3], [4], [5]]
        finally:
            sub.close()
    finally:
        publisher.close()


def test_every_subscription_and_a_resync_mark_the_next_record_fresh(address: str) -> None:
    publisher = FactsPublisher(address)
    try:
        first = FactsSubscriber(address)
        second: FactsSubscriber | None = None
        try:
            _until(publisher.wanted)
            assert publisher.fresh  # someone new: resend what goes once
            publisher.fresh = False
            second = FactsSubscriber(address)  # a second one, while the first listens
            assert second.wait_connected(5.0)
            _until(lambda: publisher.wanted() and publisher.fresh)
            publisher.fresh = False
            first.resync()  # a subscriber that lost records asks again
            _until(lambda: publisher.wanted() and publisher.fresh)
            publisher.deliver(_facts(3))
            _until(lambda: bool(first.poll()))
        finally:
            first.close()
            if second is not None:
                second.close()
        _until(lambda: not publisher.wanted())  # a resync leaves no extra subscription
    finally:
        publisher.close()


# -- a publisher that dies and comes back ----------------------------------------------------

_PUBLISHER = """
    import time
    from stepview.engine.plugin.publisher import FactsPublisher
    from tests.engine.records.test_channel import _facts
    publisher = FactsPublisher({address!r})
    started = time.time()
    step = 0
    while True:
        if publisher.wanted():
            step += 1
            publisher.deliver(_facts(step, started))
        time.sleep(0.02)  # an engine core's pace: a step every 20 ms while someone listens
"""


def _child(code: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_subscriber_sees_the_publisher_die_and_come_back(
    address: str, subscriber: FactsSubscriber
) -> None:
    assert subscriber.state is ChannelState.CONNECTING
    assert subscriber.poll() == []  # nobody there: nothing, no error

    def run_publisher() -> tuple[subprocess.Popen[str], float]:
        child = _child(_PUBLISHER.format(address=address))
        seen: list[StepFacts] = []
        _until(lambda: bool(seen.extend(subscriber.poll()) or seen), timeout=30)
        assert subscriber.connected
        return child, seen[-1].core_started

    first, first_started = run_publisher()
    try:
        assert subscriber.connects == 1
    finally:
        first.kill()
        first.wait()
    _until(lambda: _lost(subscriber))
    assert subscriber.disconnects == 1

    second, second_started = run_publisher()  # same address: zmq reconnects by itself
    try:
        assert subscriber.connects == 2
        assert second_started != first_started  # a restarted core, not the same one
    finally:
        second.kill()
        second.wait()


def test_heartbeats_notice_a_publisher_that_stops_answering(
    address: str, subscriber: FactsSubscriber
) -> None:
    child = _child(_PUBLISHER.format(address=address))
    try:
        _until(lambda: bool(subscriber.poll()), timeout=30)
        child.send_signal(signal.SIGSTOP)  # the socket stays open, nothing answers
        started = time.monotonic()
        _until(lambda: _lost(subscriber), timeout=15)
        # zmq's heartbeat timeout, not a home-made one.
        assert time.monotonic() - started >= 2.0
    finally:
        child.kill()
        child.wait()
