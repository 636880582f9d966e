"""``stepview --attach`` without vLLM: the link to the watched server, and records late or lost.

Each test plays an engine core (a :class:`Server` publishing hand-written records on a real
zmq socket) and reads what :class:`AttachedEngine` makes of them: link states before and
while connected, a lost server held until it is back, a restarted core, data-parallel
ranks, steps dated by the server, catching up on a backlog within a time budget, records
past the backlog folded together, and requests lost whole counted aloud.
test_attached_requests.py covers how the records become requests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stepview.engine.records.facts import EndedFacts
from stepview.engine.watch.link import attached, unseen
from stepview.engine.watch.link.attached import SILENT, AttachedEngine
from stepview.engine.watch.link.watched_core import RESTARTED
from stepview.model.address import plugin_records
from stepview.model.engine_api import LinkState
from stepview.model.snapshot import EngineState, RequestState
from tests.engine.watch.attach_helpers import (
    NOW,
    WAITING,
    Clock,
    Server,
    Watcher,
    ipc_address,
    next_step,
    record,
    request,
    wait_link,
    wait_until,
)

S = RequestState


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
    engine = AttachedEngine(plugin_records(address))
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
    engine = AttachedEngine(plugin_records(base, (0, 1)))
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


def test_steps_are_dated_when_the_server_made_them(
    server: Server, engine: AttachedEngine, clock: Clock
) -> None:
    clock.now = NOW + 0.01 + 0.002  # record 1 is read 2 ms after it was made
    server.send(record(1, request("a-0123abcd")))
    assert next_step(engine).age == 0.0  # the quickest delivery seen is the reference
    clock.now = NOW + 0.02 + 0.5  # record 2 is read half a second late
    server.send(record(2, request("a-0123abcd", intro=False)))
    assert next_step(engine).age == pytest.approx(0.498)  # 0.5 s late, less the 2 ms


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
    with caplog.at_level("WARNING", logger=unseen.__name__):
        # Record 5 is not read (a gap): the watch asks for a full record, and reads that.
        wait_until(lambda: engine.has_unfinished() or (publisher.wanted() and publisher.fresh))
        server.send(record(6, request("r-0123abcd", intro=False, outputs=2, new=[1, 2])))
        watcher.step()
    warned = [r.getMessage() for r in caplog.records if "arrived and ended" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("stepview: 1 requests at ")
    assert "(1 so far)" in warned[0] and "old" not in warned[0]
    assert "gone" not in {*watcher.active(), *watcher.finished()}
    assert list(watcher.active()["r"].completions[0].token_ids) == [1, 2]  # the watch goes on
    assert engine.link().unseen == 1  # for the stderr notice and stepview_requests_unseen_total
