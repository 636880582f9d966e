"""``stepview --attach`` without vLLM: how the records become requests, from adoption to end.

Each test plays an engine core (a :class:`Server` publishing hand-written records) and reads
what :class:`AttachedEngine` makes of them, step by step, folding the steps into a
:class:`RequestLedger` the way the driver does (a :class:`Watcher`): requests in flight
adopted with what the record says, token tails, an intro that comes late or never, samples
merged into one request, random client ids shortened, and how each request ends.
test_attached_link.py covers the link itself: connection, ranks, backlog and losses.
"""

from __future__ import annotations

import msgspec
import pytest

from stepview.engine.records.facts import EndedFacts
from stepview.engine.watch.link import watched_core
from stepview.engine.watch.link.adopting import ClientNames, short_id
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.engine.watch.link.watched_core import ABORTED_BY_CLIENT, LEFT
from stepview.model.engine_api import EngineRejected
from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import BEHIND, StepBudget
from stepview.model.snapshot import EngineState, RequestState, reason_of
from tests.engine.watch.attach_helpers import (
    PREEMPTED,
    WAITING,
    Clock,
    Server,
    Watcher,
    record,
    request,
    wait_until,
)

S = RequestState


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
    # The watch asks the log of ends what it missed and holds record 5 for the answer, which
    # the plug-in sends when it reads the question: as a core that steps.
    with server.stepping():
        result = watcher.step()
    assert publisher.answered == 1
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
    # (the next record in order, at a later time: no record was lost, nothing to catch up)
    server.send(record(later, request("never-0123abcd", intro=False, max_tokens=5), seq=5))
    (arrival,) = watcher.step().arrived
    assert (arrival.request_id, arrival.spec.max_tokens, arrival.prompt_token_ids) == (
        "never",
        5,
        (),
    )


def test_a_request_that_leaves_before_its_intro_is_counted_unseen_never_dropped(
    server: Server, engine: AttachedEngine, caplog: pytest.LogCaptureFixture
) -> None:
    """Named without its intro and gone within the intro's wait: it cannot be shown nor
    written to the results file, so it is counted (stderr, stepview_requests_unseen_total)."""
    watcher = Watcher(engine)
    publisher = server.publisher
    assert publisher is not None
    server.send(record(1, request("a-0123abcd", outputs=1, new=[4])))
    watcher.step()
    publisher.fresh = False  # no fresh record: b's intro does not come again
    server.send(
        record(
            2,
            request("a-0123abcd", outputs=2, new=[5], intro=False),
            request("b-0123abcd", intro=False, outputs=1, new=[9]),
        ),
        record(
            3,
            request("a-0123abcd", outputs=3, new=[6], intro=False),
            finished=["b-0123abcd"],
            ended=[EndedFacts("b-0123abcd", 2, [9, 10], "length")],
        ),
    )
    watcher.step()
    assert engine.link().unseen == 0  # b awaits its intro
    result = watcher.step()
    assert result.ended == () and list(watcher.active()) == ["a"]
    assert "b" not in watcher.finished()
    assert engine.link().unseen == 1
    assert "left before their intro" in caplog.text and "b-0123abcd" in caplog.text


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
    # The next request, a while later: steps went by, records did not (none is built for a
    # core with nothing to schedule), so its record follows the last one.
    server.send(record(300, request("c-0123abcd"), seq=4))
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


def test_without_api_the_model_is_named_by_a_full_record(
    server: Server, engine: AttachedEngine
) -> None:
    """A fleet of plug-in servers watched without their APIs still says what each runs."""
    watcher = Watcher(engine)
    assert engine.info.model == f"vLLM server at {server.address}"
    server.send(record(1, request("a-0123abcd")))  # a plug-in older than the name
    watcher.step()
    assert engine.info.model == f"vLLM server at {server.address}"
    server.send(msgspec.structs.replace(record(2, request("a-0123abcd")), model="qwen-7b"))
    watcher.step()
    assert engine.info.model == f"qwen-7b @ {server.address}"


def test_random_client_ids_are_shortened_for_the_id_column() -> None:
    uuid = "3f9a1c2e" + "0" * 24
    assert short_id(f"cmpl-{uuid}-0") == "3f9a1c2e"
    assert short_id(f"cmpl-{uuid}-1") == "3f9a1c2e-1"
    assert short_id(f"chatcmpl-{uuid}") == "3f9a1c2e"
    assert short_id("cmpl-9572bcdc3bcd79fc-0") == "9572bcdc"  # vLLM 0.32's
    assert short_id("my-request-17") == "my-request-17"
    assert short_id("cmpl-stepview-ab12cd34-u1-0") == "cmpl-stepview-ab12cd34-u1-0"


def test_no_two_requests_share_a_name() -> None:
    """vLLM's ids hold 30 random bits in their first 8 hex digits: a long watch sees two
    requests with one short id, and the ledger ignores a name it has seen before."""
    names = ClientNames(kept=3)
    first, second = "cmpl-9572bcdc3bcd79fc-0", "cmpl-9572bcdcffff0000-0"
    assert names.give(first) == "9572bcdc"
    assert names.name(second) == "9572bcdcffff0000"  # what adoption will give it
    assert names.give(second) == "9572bcdcffff0000"
    assert names.give(first) == "9572bcdc"  # its samples share its name while it is held
    names.release(first)
    names.release(second)
    # Ended, the names stay taken as long as the ledger remembers names (here 3):
    assert names.give(first) == "9572bcdc3bcd79fc"  # the same client id again (X-Request-Id)
    assert names.give("req-7") == "req-7"
    names.release("req-7")
    assert names.give("req-7") == "req-7~2"  # a client that sends one X-Request-Id twice
    assert names.give("cmpl-9572bcdc00000000-0") == "9572bcdc"  # its first use, forgotten


def test_requests_with_one_short_id_both_reach_the_results(
    server: Server, engine: AttachedEngine
) -> None:
    """The 30-minute watch's two lost requests: the second of a pair sharing 8 hex digits
    was taken for the first one seen again, and dropped without a word."""
    watcher = Watcher(engine)
    one, two = "cmpl-9572bcdc3bcd79fc-0-0123abcd", "cmpl-9572bcdcffff0000-0-4567cdef"
    server.send(record(1, request(one)))
    watcher.step()
    ended = [EndedFacts(one, 1, [5], "length")]
    server.send(record(2, finished=[one], ended=ended, full=False))
    watcher.step()
    server.send(record(3, request(two), full=False))
    watcher.step()
    both = [
        request(two, intro=False, outputs=1, new=[6]),
        request("cmpl-9572bcdc11112222-0-89abcdef"),
    ]
    server.send(record(4, *both, full=False))  # beside it, a third of the same 8 digits
    watcher.step()
    assert sorted(watcher.active()) == ["9572bcdc11112222", "9572bcdcffff0000"]
    assert list(watcher.finished()) == ["9572bcdc"]
    ended = [EndedFacts(two, 1, [6], "length")]
    server.send(record(5, request("cmpl-9572bcdc11112222-0-89abcdef"), finished=[two], ended=ended))
    watcher.step()
    done = watcher.finished()
    assert sorted(done) == ["9572bcdc", "9572bcdcffff0000"]
    assert [list(done[n].completions[0].token_ids) for n in sorted(done)] == [[5], [6]]
    assert engine.link().unseen == 0


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
