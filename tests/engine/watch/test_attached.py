"""``stepview --attach`` without vLLM: records published on a real zmq socket, read back as steps.

Each test plays an engine core (a :class:`Server` publishing hand-written records) and reads
what :class:`AttachedEngine` makes of them, step by step; most also fold the steps into a
:class:`RequestLedger`, the way the driver does, and check the views the panes would show.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from stepview.engine.driver.ledger import RequestLedger
from stepview.engine.records.facts import EndedFacts
from stepview.engine.watch import attached, watched_core
from stepview.engine.watch.adopting import short_id
from stepview.engine.watch.attached import SILENT, AttachedEngine
from stepview.engine.watch.watched_core import ABORTED_BY_CLIENT, LEFT, RESTARTED
from stepview.model.engine_api import EngineRejected, LinkState, StepResult
from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import BEHIND, StepBudget
from stepview.model.snapshot import EngineState, RequestState, RequestView, reason_of
from tests.engine.watch.attach_helpers import (
    NOW,
    PREEMPTED,
    WAITING,
    Server,
    ipc_address,
    next_step,
    record,
    request,
    wait_until,
)

S = RequestState


class Clock:
    """Wall-clock seconds that move only when a test says so (for the settling rule)."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(server: Server, clock: Clock) -> Iterator[AttachedEngine]:
    e = AttachedEngine(server.address, clock=clock)
    server.wait_subscribed()
    yield e
    e.shutdown()


def wait_link(engine: AttachedEngine, state: EngineState) -> None:
    """Poll the engine (as the driver's loop does) until its link is in ``state``."""

    def reached() -> bool:
        engine.has_unfinished()
        return engine.link().state is state

    wait_until(reached)


class Watcher:
    """The driver's bookkeeping over an attached engine, one step at a time."""

    def __init__(self, engine: AttachedEngine) -> None:
        self.engine = engine
        self.now = 0.0
        self.ledger = RequestLedger(lambda: self.now)

    def step(self) -> StepResult:
        result = next_step(self.engine)
        self.now += 0.01
        self.ledger.apply(result, self.now)
        return result

    def active(self) -> dict[str, RequestView]:
        return {v.request_id: v for v in self.ledger.active()}

    def finished(self) -> dict[str, RequestView]:
        return {v.request_id: v for v in self.ledger.finished()}


def test_requests_in_flight_are_adopted_with_what_the_record_says(
    server: Server, engine: AttachedEngine
) -> None:
    watcher = Watcher(engine)
    server.send(
        record(
            1,
            request("chat-a-0123abcd", WAITING, prompt=12, temperature=0.7, waited=3.0),
            request("chat-b-0123abcd", outputs=2, new=[5, 6], max_tokens=32),
            request("0_cmpl-c-0-89abcdef", prompt=4, computed=2),
            request("1_cmpl-c-0-89abcdef", PREEMPTED, prompt=4, preemptions=1),
            head="1_cmpl-c-0-89abcdef",  # vLLM put the preempted sample back in front
        )
    )
    result = watcher.step()
    arrived = {a.request_id: a for a in result.arrived}
    assert sorted(arrived) == ["chat-a", "chat-b", "cmpl-c-0"]
    a = arrived["chat-a"]
    assert a.prompt == "(12 prompt tokens)"
    assert a.prompt_token_ids == tuple(range(100, 112))
    assert (a.spec.temperature, a.spec.seed, a.spec.max_tokens) == (0.7, 7, 16)
    assert a.spec.ignore_eos  # as the client asked
    assert a.waited == pytest.approx(3.01)
    assert arrived["cmpl-c-0"].spec.n == 2  # two samples seen
    assert result.ended == ()

    views = watcher.active()
    assert views["chat-a"].state is S.WAITING
    assert views["chat-a"].timings.arrival == pytest.approx(0.01 - 3.01)
    assert views["chat-b"].state is S.DECODING
    assert list(views["chat-b"].completions[0].token_ids) == [5, 6]
    assert views["chat-b"].spec.max_tokens == 32
    c = views["cmpl-c-0"]
    # Samples merged: the most advanced state, the sum of preemptions.
    assert (c.state, c.computed_prompt_tokens, c.num_preemptions) == (S.PREFILLING, 2, 1)
    counters = result.counters
    assert (counters.running, counters.waiting) == (2, 2)
    assert counters.kv_cache_usage == pytest.approx(0.4)
    assert counters.generation_tokens == 2
    # What the scheduler decided, read from the same record: the budget, KV blocks, and why
    # chat-a waits (vLLM put the preempted sample of cmpl-c-0 back in front of it).
    assert result.budget == StepBudget(2048, 0, 2, 60, 100)
    assert (views["chat-b"].kv_blocks, views["chat-b"].scheduled_tokens) == (2, 1)
    assert views["chat-a"].wait_reason is None  # no reason of its own: its queue's
    reason = reason_of(views["chat-a"], result.queue_reasons)
    assert reason is not None and (reason.code, reason.blocker) == (BEHIND, "cmpl-c-0")


def test_token_tails_append_and_a_gap_asks_for_a_fresh_record(
    server: Server, engine: AttachedEngine
) -> None:
    watcher = Watcher(engine)
    server.send(record(1, request("r-0123abcd", outputs=2, new=[1, 2])))
    watcher.step()
    server.send(record(2, request("r-0123abcd", outputs=3, new=[3], intro=False)))
    result = watcher.step()
    assert result.counters.generation_tokens == 1
    assert list(watcher.active()["r"].completions[0].token_ids) == [1, 2, 3]
    assert result.interval == pytest.approx(0.01)

    # Records 3 and 4 were lost: the tail of record 5 does not join up.
    publisher = server.publisher
    assert publisher is not None
    publisher.fresh = False
    server.send(record(5, request("r-0123abcd", outputs=6, new=[6], intro=False)))
    result = watcher.step()
    assert result.outputs == ()
    assert result.interval == pytest.approx(0.01)  # per step, over the gap
    wait_until(lambda: publisher.wanted() and publisher.fresh)  # it asked for a fresh one
    server.send(record(6, request("r-0123abcd", outputs=7, new=[1, 2, 3, 4, 5, 6, 7])))
    result = watcher.step()
    assert result.counters.generation_tokens == 4
    assert list(watcher.active()["r"].completions[0].token_ids) == [1, 2, 3, 4, 5, 6, 7]


def test_a_request_seen_without_its_intro_waits_for_it(
    server: Server, engine: AttachedEngine, clock: Clock
) -> None:
    watcher = Watcher(engine)
    publisher = server.publisher
    assert publisher is not None
    publisher.fresh = False
    server.send(record(1, request("late-0123abcd", intro=False, outputs=1, new=[9])))
    result = watcher.step()
    assert result.arrived == () and watcher.active() == {}
    wait_until(lambda: publisher.wanted() and publisher.fresh)
    server.send(record(2, request("late-0123abcd", outputs=1, new=[9])))
    result = watcher.step()
    assert [a.request_id for a in result.arrived] == ["late"]
    assert result.arrived[0].prompt_token_ids  # the intro came with the fresh record

    # An intro that never comes: adopted anyway a while later (the server's time), with
    # what is known.
    server.send(record(3, request("never-0123abcd", intro=False, max_tokens=5)))
    assert watcher.step().arrived == ()
    server.send(record(4, request("never-0123abcd", intro=False, max_tokens=5)))
    assert watcher.step().arrived == ()
    later = 3 + round(watched_core.INTRO_WAIT_S / 0.01)  # records are 10 ms apart
    server.send(record(later, request("never-0123abcd", intro=False, max_tokens=5)))
    (arrival,) = watcher.step().arrived
    assert (arrival.request_id, arrival.spec.max_tokens, arrival.prompt_token_ids) == (
        "never",
        5,
        (),
    )


def test_requests_that_leave_end_as_finished_with_the_reason_unknown(
    server: Server, engine: AttachedEngine
) -> None:
    watcher = Watcher(engine)
    server.send(
        record(1, request("a-0123abcd", outputs=1, new=[4]), request("b-0123abcd", WAITING)),
        record(2, request("b-0123abcd", WAITING, intro=False), finished=["a-0123abcd"]),
    )
    watcher.step()
    result = watcher.step()
    assert [(e.request_id, e.state, e.reason) for e in result.ended] == [("a", S.FINISHED, LEFT)]
    done = watcher.finished()["a"]
    assert done.state is S.FINISHED and done.error is None
    assert [(list(c.token_ids), c.finish_reason) for c in done.completions] == [([4], LEFT)]
    # The idle record after the last one left: the other one ends too, with no tokens.
    server.send(record(3, idle=True, finished=["b-0123abcd"]))
    result = watcher.step()
    assert result.interval == pytest.approx(0.01)
    assert [e.request_id for e in result.ended] == ["b"]
    assert watcher.finished()["b"].completions[0].finish_reason == LEFT
    assert watcher.active() == {}
    assert engine.link().state is EngineState.IDLE
    server.send(record(300, request("c-0123abcd")))  # the next request, a while later
    assert watcher.step().interval is None  # the idle time was no step's


def test_the_record_after_a_request_ended_says_how(server: Server, engine: AttachedEngine) -> None:
    watcher = Watcher(engine)
    server.send(
        record(
            1,
            request("a-0123abcd", outputs=1, new=[4]),
            request("0_n-0123abcd", outputs=1, new=[7]),
            request("1_n-0123abcd", outputs=1, new=[8]),
            request("x-0123abcd", outputs=2, new=[1, 2]),
            request("g-0123abcd", outputs=1, new=[1]),
        ),
        record(
            2,
            request("1_n-0123abcd", outputs=2, new=[9], intro=False),
            finished=["a-0123abcd", "0_n-0123abcd", "x-0123abcd", "g-0123abcd"],
            ended=[
                EndedFacts("a-0123abcd", 3, [4, 5, 6], "length"),  # two more tokens
                EndedFacts("0_n-0123abcd", 2, [7, 70], "stop", 2),
                EndedFacts("x-0123abcd", 3, [1, 2, 3], "abort"),
                # Records carrying g's tokens were lost: its end brings them all.
                EndedFacts("g-0123abcd", 5, [1, 2, 3, 4, 5], "length"),
            ],
        ),
    )
    watcher.step()
    result = watcher.step()
    assert result.counters.generation_tokens == 9
    assert list(watcher.finished()["g"].completions[0].token_ids) == [1, 2, 3, 4, 5]
    assert [(e.request_id, e.state, e.reason) for e in result.ended] == [
        ("x", S.ABORTED, ABORTED_BY_CLIENT)
    ]
    done = watcher.finished()
    (a,) = done["a"].completions
    assert (done["a"].state, list(a.token_ids), a.finish_reason) == (
        S.FINISHED,
        [4, 5, 6],
        "length",
    )
    assert list(done["x"].completions[0].token_ids) == [1, 2, 3]
    assert done["x"].completions[0].finish_reason is None
    # One sample of n=2 ended: the request runs on until the other one does.
    n = watcher.active()["n"]
    assert [(c.finish_reason, c.stop_reason) for c in n.completions] == [("stop", 2), (None, None)]
    server.send(
        record(
            3,
            idle=True,
            finished=["1_n-0123abcd"],
            ended=[EndedFacts("1_n-0123abcd", 3, [8, 9, 10], "length")],
        )
    )
    watcher.step()
    n = watcher.finished()["n"]
    assert n.state is S.FINISHED
    assert [(list(c.token_ids), c.finish_reason) for c in n.completions] == [
        ([7, 70], "stop"),
        ([8, 9, 10], "length"),
    ]


def test_a_restarted_engine_core_ends_what_the_old_one_held(
    server: Server, engine: AttachedEngine
) -> None:
    watcher = Watcher(engine)
    server.send(record(40, request("a-0123abcd", outputs=1, new=[4]), started=1.0))
    watcher.step()
    server.send(record(1, request("c-0123abcd"), started=2.0))
    result = watcher.step()
    assert [(e.request_id, e.state, e.reason) for e in result.ended] == [
        ("a", S.ABORTED, RESTARTED)
    ]
    assert [a.request_id for a in result.arrived] == ["c"]
    assert result.interval is None  # a new core: no previous step to measure from
    assert watcher.finished()["a"].error == RESTARTED
    assert set(watcher.active()) == {"c"}


def test_a_lost_server_holds_the_view_until_it_is_back(
    server: Server, engine: AttachedEngine, clock: Clock
) -> None:
    watcher = Watcher(engine)
    server.send(record(1, request("a-0123abcd", outputs=1, new=[4])))
    watcher.step()
    assert engine.link().state is EngineState.RUNNING
    server.kill()
    wait_link(engine, EngineState.DISCONNECTED)
    link = engine.link()
    assert f"DISCONNECTED from {server.address}" in link.message
    assert "reconnecting" in link.message and "1 held as they were" in link.message
    clock.now += 60
    assert not engine.has_unfinished()  # held, however long it takes
    assert watcher.active()["a"].state is S.DECODING

    # Back, with nothing in flight: no record comes; after a while the held ones are lost.
    server.restart()
    wait_link(engine, EngineState.RUNNING)  # connected; what it held is not settled yet
    assert not engine.has_unfinished()
    clock.now += attached.SETTLE_S
    result = watcher.step()
    assert [(e.request_id, e.state, e.reason) for e in result.ended] == [("a", S.ABORTED, SILENT)]
    assert engine.link().state is EngineState.IDLE
    assert (result.counters.running, result.counters.kv_cache_usage) == (0, 0.0)


def test_a_server_back_with_its_requests_goes_on(
    server: Server, engine: AttachedEngine, clock: Clock
) -> None:
    watcher = Watcher(engine)
    server.send(record(1, request("a-0123abcd", outputs=1, new=[4])))
    watcher.step()
    server.kill()
    wait_link(engine, EngineState.DISCONNECTED)
    server.restart()
    server.wait_subscribed()
    server.send(record(9, request("a-0123abcd", outputs=5, new=[4, 5, 6, 7, 8])))
    result = watcher.step()
    assert result.ended == () and result.arrived == ()
    clock.now += attached.SETTLE_S
    assert list(watcher.active()["a"].completions[0].token_ids) == [4, 5, 6, 7, 8]


def test_link_states_before_and_while_connected(tmp_path: Path) -> None:
    address = ipc_address(tmp_path)
    engine = AttachedEngine(address)
    try:
        link = engine.link()
        assert link.state is EngineState.STARTING
        assert address in link.message and "STEPVIEW_PUBLISH" in link.message
        server = Server(address)
        try:
            server.wait_subscribed()
            wait_link(engine, EngineState.IDLE)
            server.send(record(1, request("a-0123abcd")))
            next_step(engine)
            assert engine.link() == LinkState(EngineState.RUNNING)
        finally:
            server.kill()
    finally:
        engine.shutdown()


def test_ranks_are_labelled_and_keep_their_own_figures(tmp_path: Path) -> None:
    base = ipc_address(tmp_path)
    servers = [Server(base), Server(f"{base}_dp1")]
    engine = AttachedEngine(base, (0, 1))
    try:
        for s in servers:
            s.wait_subscribed()
        watcher = Watcher(engine)
        servers[0].send(record(1, request("cmpl-x-0-0123abcd"), rank=0, free=90))
        servers[1].send(
            record(1, request("cmpl-x-0-0123abcd"), request("y-0123abcd", WAITING), rank=1, free=50)
        )
        ids = {a.request_id for _ in range(2) for a in watcher.step().arrived}
        assert ids == {"cmpl-x-0@0", "cmpl-x-0@1", "y@1"}
        ranks = engine.link().ranks
        assert [(r.rank, r.connected, r.running, r.waiting) for r in ranks] == [
            (0, True, 1, 0),
            (1, True, 1, 1),
        ]
        assert [r.kv_cache_usage for r in ranks] == [pytest.approx(0.1), pytest.approx(0.5)]
        assert not engine.has_unfinished()  # nothing left to report
        servers[1].kill()
        wait_link(engine, EngineState.DISCONNECTED)
        assert f"rank 1 at {base}_dp1" in engine.link().message
        assert watcher.active().keys() == {"cmpl-x-0@0", "cmpl-x-0@1", "y@1"}
    finally:
        engine.shutdown()
        for s in servers:
            s.kill()


def test_without_api_nothing_can_be_added_or_aborted(
    server: Server, engine: AttachedEngine
) -> None:
    watcher = Watcher(engine)
    with pytest.raises(EngineRejected, match="without --api"):
        engine.add_request("u1", "hi", SamplingSpec())
    server.send(record(1, request("a-0123abcd")))
    watcher.step()
    # The ledger keeps a request the engine cannot abort, and says why on it.
    assert watcher.ledger.abort("a", engine) is False
    view = watcher.active()["a"]
    assert view.state is S.DECODING
    assert view.error is not None and "cannot abort" in view.error


def test_random_client_ids_are_shortened_for_the_id_column() -> None:
    uuid = "3f9a1c2e" + "0" * 24
    assert short_id(f"cmpl-{uuid}-0") == "3f9a1c2e"
    assert short_id(f"cmpl-{uuid}-1") == "3f9a1c2e-1"
    assert short_id(f"chatcmpl-{uuid}") == "3f9a1c2e"
    assert short_id("cmpl-9572bcdc3bcd79fc-0") == "9572bcdc"  # vLLM 0.32's
    assert short_id("my-request-17") == "my-request-17"
    assert short_id("cmpl-stepview-ab12cd34-u1-0") == "cmpl-stepview-ab12cd34-u1-0"


def test_steps_are_dated_when_the_server_made_them(
    server: Server, engine: AttachedEngine, clock: Clock
) -> None:
    clock.now = NOW + 0.01 + 0.002  # record 1 is read 2 ms after it was made
    server.send(record(1, request("a-0123abcd")))
    assert next_step(engine).age == 0.0  # the quickest delivery seen is the reference
    clock.now = NOW + 0.02 + 0.5  # record 2 is read half a second late
    server.send(record(2, request("a-0123abcd", intro=False)))
    assert next_step(engine).age == pytest.approx(0.498)  # 0.5 s late, less the 2 ms


def test_samples_added_a_step_apart_make_one_request(
    server: Server, engine: AttachedEngine
) -> None:
    watcher = Watcher(engine)
    server.send(record(1, request("0_n-0123abcd")))
    (first,) = watcher.step().arrived
    assert first.spec.n == 1
    server.send(record(2, request("0_n-0123abcd", intro=False), request("1_n-0123abcd")))
    (again,) = watcher.step().arrived
    assert (again.request_id, again.spec.n) == ("n", 2)
    assert watcher.active()["n"].spec.n == 2 and len(watcher.active()) == 1


def test_a_step_catches_up_on_many_records_at_once(
    server: Server, engine: AttachedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(attached, "CATCH_UP_S", 60.0)  # however slow the machine
    watcher = Watcher(engine)
    records = [record(1, request("a-0123abcd", outputs=1, new=[1]))]
    last = attached.CATCH_UP_AFTER + 10
    records += [
        record(i, request("a-0123abcd", outputs=i, new=[i], intro=False)) for i in range(2, last)
    ]
    records.append(
        record(
            last,
            request("b-0123abcd"),
            finished=["a-0123abcd"],
            ended=[EndedFacts("a-0123abcd", last, list(range(1, last + 1)), "stop")],
        )
    )
    server.send(*records)
    wait_until(lambda: engine.has_unfinished() and len(engine._backlog) == last)
    result = watcher.step()  # more waiting than CATCH_UP_AFTER: all read in one step
    assert not engine.has_unfinished()
    assert [a.request_id for a in result.arrived] == ["a", "b"]
    assert result.counters.generation_tokens == last
    assert result.interval == pytest.approx(0.01)
    done = watcher.finished()["a"]
    assert (list(done.completions[0].token_ids), done.completions[0].finish_reason) == (
        list(range(1, last + 1)),
        "stop",
    )
    assert set(watcher.active()) == {"b"}


def test_a_catch_up_step_stops_at_its_time_budget_and_loses_nothing(
    server: Server, engine: AttachedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A starved stepview: every catch-up step is out of time after its first record, so it
    # goes back to the sockets; the records left wait in the backlog, none is skipped. The
    # records span 2.3 s of the server's steps, so the status bar says how late the view is.
    monkeypatch.setattr(attached, "CATCH_UP_S", 0.0)
    watcher = Watcher(engine)
    last = 230
    assert attached.CATCH_UP_AFTER + 4 < last < attached.MAX_BACKLOG
    records = [record(1, request("a-0123abcd", outputs=1, new=[1]))]
    records += [
        record(i, request("a-0123abcd", outputs=i, new=[i], intro=False)) for i in range(2, last)
    ]
    records.append(
        record(
            last,
            finished=["a-0123abcd"],
            ended=[EndedFacts("a-0123abcd", last, list(range(1, last + 1)), "stop")],
        )
    )
    server.send(*records)
    wait_until(lambda: engine.has_unfinished() and len(engine._backlog) == last)
    generated = [watcher.step().counters.generation_tokens for _ in range(4)]
    assert generated == [1, 1, 1, 1]  # one record each while more than CATCH_UP_AFTER wait
    assert len(engine._backlog) == last - 4
    link = engine.link()
    assert link.message == "view 2 s behind the server, catching up"
    assert 2.0 <= link.behind < 3.0  # the figure the message rounds (for --metrics-port)
    while engine.has_unfinished():
        watcher.step()
    assert engine.link()[1:] == ("", (), 0.0, 0)  # all read: as late as delivery, no more
    done = watcher.finished()["a"]
    assert (list(done.completions[0].token_ids), done.completions[0].finish_reason) == (
        list(range(1, last + 1)),
        "stop",
    )


def test_records_past_the_backlog_are_read_as_one_and_nothing_is_lost(
    server: Server, engine: AttachedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(attached, "MAX_BACKLOG", 2)
    watcher = Watcher(engine)
    server.send(
        record(1, request("a-0123abcd", outputs=1, new=[1]), request("b-0123abcd")),
        record(
            2,
            request("b-0123abcd", intro=False),
            ended=[EndedFacts("a-0123abcd", 2, [1, 2], "length")],
            finished=["a-0123abcd"],
            full=False,
        ),
        record(3, request("b-0123abcd", intro=False, outputs=1, new=[5]), full=False),
        record(4, request("b-0123abcd", intro=False, outputs=2, new=[6]), full=False),
        record(5, request("b-0123abcd", intro=False, outputs=3, new=[7]), full=False),
    )
    # All five received; the oldest folded into the next until two are left.
    wait_until(
        lambda: (
            engine.has_unfinished()  # (reads what came)
            and len(engine._backlog) == 2
            and engine._backlog[-1][1].step == 5
        )
    )
    first = watcher.step()
    # a came and went, b's intro and a's end in records folded into the first one read:
    # nothing lost.
    assert [(a.request_id, a.spec.temperature) for a in first.arrived] == [("a", 0.0), ("b", 0.0)]
    assert first.arrived[1].prompt_token_ids == tuple(range(100, 108))
    assert watcher.finished()["a"].completions[0].finish_reason == "length"
    watcher.step()
    assert list(watcher.active()["b"].completions[0].token_ids) == [5, 6, 7]


def test_requests_whose_whole_life_was_in_lost_records_are_counted_aloud(
    server: Server, engine: AttachedEngine, caplog: pytest.LogCaptureFixture
) -> None:
    """A request that arrived and ended within records zmq dropped is in no record left: it
    cannot be shown, but the log says how many (a soak lost 131 of 1 000 000 without a word).
    Ends in records before the watch's first full one were never its to show: not counted."""
    watcher = Watcher(engine)
    before = EndedFacts("old-0123abcd", 3, [1, 2, 3], "length")
    server.send(record(1, full=False, ended=[before], finished=["old-0123abcd"]))
    server.send(record(2, request("r-0123abcd", outputs=1, new=[1])))
    watcher.step()  # record 1 is not read (no full record before it); record 2 is
    publisher = server.publisher
    assert publisher is not None
    publisher.fresh = False
    # Records 3 and 4 were lost; record 5 says that "gone" ended: it was never seen.
    gone = EndedFacts("gone-0123abcd", 2, [7, 8], "length")
    server.send(
        record(
            5,
            request("r-0123abcd", intro=False, outputs=2, new=[2]),
            full=False,
            ended=[gone],
            finished=["gone-0123abcd"],
        )
    )
    logger = logging.getLogger(watched_core.__name__)
    logger.addHandler(caplog.handler)  # stepview's loggers may not propagate to the root
    with caplog.at_level("WARNING", logger=watched_core.__name__):
        # Record 5 is not read (a gap): the watch asks for a full record, and reads that.
        wait_until(lambda: engine.has_unfinished() or (publisher.wanted() and publisher.fresh))
        server.send(record(6, request("r-0123abcd", intro=False, outputs=2, new=[1, 2])))
        watcher.step()
    logger.removeHandler(caplog.handler)
    warned = [r.getMessage() for r in caplog.records if "arrived and ended" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("stepview: 1 requests at ")
    assert "(1 so far)" in warned[0] and "old" not in warned[0]
    assert "gone" not in {*watcher.active(), *watcher.finished()}
    assert list(watcher.active()["r"].completions[0].token_ids) == [1, 2]  # the watch goes on
    assert engine.link().unseen == 1  # for the stderr notice and stepview_requests_unseen_total
