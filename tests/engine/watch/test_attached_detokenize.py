"""``--attach ... --api``: other clients' prompts and completions, decoded by the server.

A :class:`Server` publishes the engine core's records (token ids only) and a local HTTP
server plays vLLM's API (:mod:`tests.engine.watch.fake_api`: ``POST /detokenize`` decodes token
``t`` as `` wT``). The attached engine's clock is a test's :class:`Clock`, so a record held
for its text is held until the fake answers, or until the test moves the clock past
:data:`~stepview.engine.watch.link.descriptions.HOLD_S`. Where a test looks at the view before the
server's answer, the fake holds its answer until the test releases it (``decoding``), and the
test then waits until the detokenizer has the answer (``Detokenizer.done``) before looking
after it: nothing depends on the machine's speed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar, cast

import pytest

from stepview.engine.records.facts import EndedFacts, split_internal_id
from stepview.engine.watch.api import server_api
from stepview.engine.watch.api.server_api import ServerApi
from stepview.engine.watch.link.adopting import short_id
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.engine.watch.link.descriptions import HOLD_MAX_S, HOLD_S, Descriptions
from stepview.files.records import request_record
from stepview.model.address import plugin_records
from stepview.model.snapshot import RequestView
from tests.engine.watch.attach_helpers import Clock, Server, Watcher, record, request, wait_until
from tests.engine.watch.fake_api import FakeApi, fake_text

A = "cmpl-0123456789abcdef-0-0123abcd"  # another client's completion, adopted as "01234567"
B0 = "0_cmpl-fedcba9876543210-0-89abcdef"  # one with n=2: its samples 0 and 1
B1 = "1_cmpl-fedcba9876543210-0-89abcdef"
C = "cmpl-aaaabbbbccccdddd-0-01234567"
D = "cmpl-1111222233334444-0-01234567"
LOGGER = "stepview.engine.watch.link.detokenize"
FAILSAFE_S = 60.0  # far beyond any step, far below the server timeout a waiting step would wait
T = TypeVar("T")


@pytest.fixture
def engine(server: Server, api: ServerApi, clock: Clock) -> Iterator[AttachedEngine]:
    e = AttachedEngine(plugin_records(server.address), api=api, clock=clock)
    server.wait_subscribed()
    yield e
    e.shutdown()


def described(engine: AttachedEngine) -> Descriptions:
    """The engine's :class:`Descriptions` (it has one: it was given ``api``)."""
    descriptions = engine._described
    assert descriptions is not None
    return descriptions


def run_one(watcher: Watcher, server: Server, core_id: str, first: int) -> RequestView:
    """A request of another client seen running (record ``first``), then ended (the next
    record); its finished view."""
    server.send(record(first, request(core_id, prompt=4, outputs=1, new=[7])))
    watcher.step()
    ended = EndedFacts(core_id, 2, [7, 8], "length")
    server.send(record(first + 1, idle=True, finished=[core_id], ended=[ended]))
    watcher.step()  # held until the server answered for it (the clock stands still)
    return watcher.finished()[short_id(split_internal_id(core_id)[0])]


def detokenize_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_other_clients_prompts_and_completions_take_the_servers_text(
    server: Server, engine: AttachedEngine, fake_api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_api, "DETOKENIZE_TIMEOUT_S", 60.0)  # however busy the machine
    fake_api.decoding.clear()  # /detokenize answers when the test says
    detokenizer = described(engine).detokenizer
    watcher = Watcher(engine)
    running = (
        request(A, prompt=4, outputs=1, new=[7]),
        request(B0, prompt=3),
        request(B1, prompt=3),
    )
    server.send(record(1, *running))
    watcher.step()
    # Asked at once (the server holds the first question, the second waits its turn) ...
    wait_until(lambda: fake_api.posts.count("/detokenize") == 1)
    server.send(record(2, *running))
    watcher.step()
    # ... and until the server answers, the panes show token counts.
    assert {v.prompt for v in watcher.active().values()} == {
        "(4 prompt tokens)",
        "(3 prompt tokens)",
    }
    fake_api.decoding.set()
    wait_until(lambda: detokenizer.done == 2)  # both answers are in
    server.send(record(3, *running))
    watcher.step()  # told with the next step read
    assert fake_api.detokenized == [list(range(100, 104)), list(range(100, 103))]  # in turn
    a, b = watcher.active()["01234567"], watcher.active()["fedcba98"]
    assert a.prompt == fake_text(range(100, 104)) and a.prompt_token_ids == tuple(range(100, 104))
    assert b.prompt == fake_text(range(100, 103))

    # They end: EOS (stop, no stop string) is not part of vLLM's text, so not decoded.
    ends = [
        EndedFacts(A, 3, [7, 8, 2], "stop"),
        EndedFacts(B0, 2, [5, 6], "length"),
        EndedFacts(B1, 2, [9, 10], "length"),
    ]
    server.send(record(4, idle=True, finished=[A, B0, B1], ended=ends))
    watcher.step()  # held until the completions' text came (the clock stands still)
    a, b = watcher.finished()["01234567"], watcher.finished()["fedcba98"]
    (sample,) = a.completions
    assert (sample.text, list(sample.token_ids), sample.finish_reason) == (
        fake_text([7, 8]),
        [7, 8, 2],
        "stop",
    )
    assert [c.text for c in b.completions] == [fake_text([5, 6]), fake_text([9, 10])]
    result = request_record(a)  # the results file's record
    assert result["prompt"] == fake_text(range(100, 104))
    assert result["completions"][0]["text"] == fake_text([7, 8])
    assert sorted(fake_api.detokenized) == sorted(
        [list(range(100, 104)), list(range(100, 103)), [7, 8], [5, 6], [9, 10]]
    )


def test_a_server_without_detokenize_is_asked_once(
    server: Server, engine: AttachedEngine, fake_api: FakeApi, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    fake_api.has_detokenize = False
    watcher = Watcher(engine)
    first = run_one(watcher, server, A, 1)
    second = run_one(watcher, server, C, 3)
    for done in (first, second):
        assert done.prompt == "(4 prompt tokens)"
        assert [(c.text, list(c.token_ids)) for c in done.completions] == [("", [7, 8])]
    assert fake_api.posts.count("/detokenize") == 1
    (logged,) = detokenize_logs(caplog)
    assert "/detokenize" in logged and "Not Found" in logged


def test_error_answers_and_a_lost_server_leave_token_counts_said_once(
    server: Server, engine: AttachedEngine, fake_api: FakeApi, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    fake_api.detokenize_status = 500
    watcher = Watcher(engine)
    first = run_one(watcher, server, A, 1)
    assert (first.prompt, first.completions[0].text) == ("(4 prompt tokens)", "")
    fake_api.close()  # the server is gone: asking fails, nothing else does
    second = run_one(watcher, server, C, 3)
    assert (second.prompt, second.completions[0].text) == ("(4 prompt tokens)", "")
    assert fake_api.posts.count("/detokenize") == 2  # an error is no reason to stop asking
    (logged,) = detokenize_logs(caplog)
    assert "it went wrong" in logged


def test_a_server_that_does_not_answer_in_time_leaves_token_counts(
    server: Server,
    engine: AttachedEngine,
    fake_api: FakeApi,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    monkeypatch.setattr(server_api, "DETOKENIZE_TIMEOUT_S", 0.2)
    fake_api.decoding.clear()  # never answers
    done = run_one(Watcher(engine), server, A, 1)  # held until both questions timed out
    assert (done.prompt, done.completions[0].text) == ("(4 prompt tokens)", "")
    (logged,) = detokenize_logs(caplog)
    assert "timed out" in logged


def returns_while_held(fake_api: FakeApi, call: Callable[[], T]) -> T:
    """``call()``, which must return while the fake still holds ``/detokenize``'s answer: the
    test lets it go only afterwards, so a call that waited for the server would wait until
    the server's timeout (10 minutes here). The join's bound is only a failsafe."""
    assert not fake_api.decoding.is_set()
    outcome: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name="step-under-test", daemon=True)
    thread.start()
    thread.join(FAILSAFE_S)
    assert not thread.is_alive(), "a step waited for the server's answer"
    assert not fake_api.decoding.is_set()  # the answer was still held when it returned
    ((returned, value),) = outcome
    if not returned:
        raise cast(BaseException, value)
    return cast(T, value)


def test_a_slow_server_never_holds_a_step_up(
    server: Server,
    engine: AttachedEngine,
    fake_api: FakeApi,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(server_api, "DETOKENIZE_TIMEOUT_S", 600.0)  # late, never timed out
    fake_api.decoding.clear()  # /detokenize answers when the test says
    watcher = Watcher(engine)

    def step() -> None:
        returns_while_held(fake_api, watcher.step)

    server.send(record(1, request(A, prompt=4, outputs=1, new=[7])))
    step()
    wait_until(lambda: fake_api.posts.count("/detokenize") == 1)  # the server has it
    server.send(record(2, request(A, prompt=4, outputs=2, new=[8])))
    step()  # never waits for a prompt's text
    assert watcher.active()["01234567"].prompt == "(4 prompt tokens)"

    ended = EndedFacts(A, 3, [7, 8, 9], "length")
    server.send(record(3, idle=True, finished=[A], ended=[ended]))
    # Held for its completion's text, without waiting: nothing to report yet.
    wait_until(
        lambda: (
            not returns_while_held(fake_api, engine.has_unfinished) and len(engine._backlog) == 1
        )
    )
    clock.now += HOLD_S  # no answer in time: it finishes without the text
    step()
    done = watcher.finished()["01234567"]
    assert (done.prompt, done.completions[0].text) == ("(4 prompt tokens)", "")
    assert list(done.completions[0].token_ids) == [7, 8, 9]

    fake_api.decoding.set()  # the prompt's answer comes late: dropped, the view stays
    wait_until(lambda: described(engine).detokenizer.done == 1)
    fake_api.decoding.clear()  # held again, for the next request's prompt
    server.send(record(4, request(C, prompt=2, outputs=1, new=[1])))
    step()
    assert watcher.finished()["01234567"] is done
    wait_until(lambda: fake_api.posts.count("/detokenize") == 2)  # the server has C's prompt
    fake_api.decoding.set()
    wait_until(lambda: described(engine).detokenizer.done == 2)
    # The completion's question, still queued when the request ended, was never asked.
    assert fake_api.detokenized == [list(range(100, 104)), list(range(100, 102))]


def test_questions_about_requests_that_ended_are_never_asked(
    server: Server,
    engine: AttachedEngine,
    fake_api: FakeApi,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A backlog does not outlive its requests: what is still queued about requests that
    finished without their text is dropped, so the next request's text is not late too."""
    monkeypatch.setattr(server_api, "DETOKENIZE_TIMEOUT_S", 60.0)  # late, never timed out
    fake_api.decoding.clear()  # the server is slow: /detokenize answers when the test says
    detokenizer = described(engine).detokenizer
    watcher = Watcher(engine)
    server.send(record(1, request(A, prompt=4, outputs=1, new=[7]), request(C, prompt=2)))
    watcher.step()
    wait_until(lambda: fake_api.posts.count("/detokenize") == 1)  # A's prompt; C's waits
    ends = [EndedFacts(A, 2, [7, 8], "length"), EndedFacts(C, 2, [5, 6], "length")]
    server.send(record(2, idle=True, finished=[A, C], ended=ends))
    # Held for their completions' text: nothing to report yet.
    wait_until(lambda: not engine.has_unfinished() and len(engine._backlog) == 1)
    clock.now += HOLD_S  # no answer in time: both finish without their text
    watcher.step()
    assert {watcher.finished()[k].prompt for k in ("01234567", "aaaabbbb")} == {
        "(4 prompt tokens)",
        "(2 prompt tokens)",
    }
    # A request arriving now is asked about next: three questions were dropped unasked.
    server.send(record(3, request(B0, prompt=3)))
    watcher.step()
    fake_api.decoding.set()
    wait_until(lambda: detokenizer.done == 2)
    assert fake_api.detokenized == [list(range(100, 104)), list(range(100, 103))]
    server.send(record(4, request(B0, prompt=3)))
    watcher.step()
    assert watcher.active()["fedcba98"].prompt == fake_text(range(100, 103))


def test_what_a_held_record_waits_for_is_asked_before_other_prompts(
    server: Server,
    engine: AttachedEngine,
    fake_api: FakeApi,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A burst of arrivals queues their prompts; one that ends meanwhile jumps that queue,
    its prompt and completion both, so its record is held for two answers, not for all."""
    monkeypatch.setattr(server_api, "DETOKENIZE_TIMEOUT_S", 60.0)  # late, never timed out
    fake_api.decoding.clear()  # /detokenize answers when the test says
    watcher = Watcher(engine)
    burst = (request(A, prompt=4), request(C, prompt=2), request(D, prompt=5, outputs=1, new=[7]))
    server.send(record(1, *burst))
    watcher.step()
    wait_until(lambda: fake_api.posts.count("/detokenize") == 1)  # A's prompt; C's, D's wait
    ended = EndedFacts(D, 2, [7, 8], "length")
    server.send(record(2, *burst[:2], finished=[D], ended=[ended]))
    wait_until(lambda: not engine.has_unfinished() and len(engine._backlog) == 1)
    fake_api.decoding.set()
    watcher.step()  # held until D's text came (the clock stands still)
    done = watcher.finished()["11112222"]
    assert (done.prompt, done.completions[0].text) == (
        fake_text(range(100, 105)),
        fake_text([7, 8]),
    )
    wait_until(lambda: described(engine).detokenizer.done == 4)
    assert fake_api.detokenized == [
        list(range(100, 104)),  # A's prompt, asked before D ended
        list(range(100, 105)),  # D's prompt, hurried
        [7, 8],  # D's completion
        list(range(100, 102)),  # C's prompt, after all that
    ]


def test_a_connection_the_server_closed_while_idle_is_opened_again(
    api: ServerApi, fake_api: FakeApi
) -> None:
    """vLLM's server closes a kept-alive connection after 5 s idle, and the next call finds
    it reset. Seen in a busy run: a completion decoded more than 5 s after its prompt lost
    its text. That call is made again, once, on a new connection."""
    fake_api.hang_up = True
    assert api.detokenize([1, 2]) == fake_text([1, 2])
    assert api.detokenize([3]) == fake_text([3])  # on the connection the server closed
    assert fake_api.detokenized == [[1, 2], [3]]


def test_a_record_is_held_while_the_server_keeps_answering_up_to_a_bound(
    server: Server,
    engine: AttachedEngine,
    fake_api: FakeApi,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A busy server (or a watch starved of CPU) answers slowly but steadily: the record
    that ends three requests waits past :data:`HOLD_S` while answers keep coming, and no
    longer than :data:`HOLD_MAX_S`. Before, two answers 0.9 s apart lost every text."""
    monkeypatch.setattr(server_api, "DETOKENIZE_TIMEOUT_S", 60.0)  # late, never timed out
    fake_api.one_by_one = gate = threading.Semaphore(0)
    detokenizer = described(engine).detokenizer
    watcher = Watcher(engine)
    ids = (A, C, D)
    server.send(record(1, *(request(i, prompt=3, outputs=1, new=[7]) for i in ids)))
    watcher.step()
    ends = [EndedFacts(i, 2, [7, 8], "length") for i in ids]
    server.send(record(2, idle=True, finished=list(ids), ended=ends))
    # Received at clock.now and held: six questions (three prompts hurried, three completions).
    wait_until(lambda: not engine.has_unfinished() and len(engine._backlog) == 1)
    step = 0.9 * HOLD_S
    for answered in range(1, 6):  # five answers, each within HOLD_S of the last
        clock.now += step
        gate.release()
        wait_until(lambda n=answered: detokenizer.done == n)
        assert not engine.has_unfinished(), f"released after {answered} answers"
    clock.now += HOLD_MAX_S - 5 * step  # the sixth has not come: held long enough
    watcher.step()
    done = watcher.finished()
    texts = [(done[k].prompt, done[k].completions[0].text) for k in ("01234567", "aaaabbbb")]
    assert texts == [(fake_text(range(100, 103)), fake_text([7, 8]))] * 2
    last = done["11112222"]  # its completion was the sixth question
    assert (last.prompt, last.completions[0].text) == (fake_text(range(100, 103)), "")
