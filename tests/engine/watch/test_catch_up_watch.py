"""A watch that falls behind loses no request: it catches up from the plug-in's log of ends.

The engine core is the real capture over a fake scheduler, publishing on a real zmq socket
(tests/engine/watch/fake_core.py); the watch is the real attached engine, in this process
with the driver's ledger, or the real ``stepview --attach --headless`` in a child process.
Records are lost on purpose: zmq's queues made tiny while the watch reads nothing for a
burst of requests, or the watch stopped (``SIGSTOP``) past the heartbeats that keep its
link. Every request then ends in the watch with its own tokens and finish reason, and none
is counted unseen; with a log too small for the burst, what fell out of it is counted, and
only that.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stepview.engine.plugin import publisher as publisher_module
from stepview.engine.plugin.publisher import FactsPublisher
from stepview.engine.plugin.stacks import StackWatch, core_busy
from stepview.engine.records import channel
from stepview.engine.watch.api.server_api import ServerApi
from stepview.engine.watch.link import catching_up
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.engine.watch.link.local_text import AGREED
from stepview.model.address import plugin_records
from tests.engine.watch.attach_helpers import (
    Server,
    Watcher,
    ipc_address,
    record,
    request,
    result_ids,
    wait_until,
    watch_command,
    watching,
)
from tests.engine.watch.fake_api import FakeApi, fake_text, write_tokenizer
from tests.engine.watch.fake_core import PROMPT, FakeCore, tokens_of

pytestmark = pytest.mark.engine  # the fake scheduler's statuses are vLLM's RequestStatus

BURST = 400


@pytest.fixture
def tiny_queues(monkeypatch: pytest.MonkeyPatch) -> None:
    """zmq keeps two messages per side before it drops (the kernel's socket buffers hold
    more: a burst is made big enough to overflow both)."""
    monkeypatch.setattr(publisher_module, "HIGH_WATER_MARK", 2)
    monkeypatch.setattr(channel, "HIGH_WATER_MARK", 2)


@pytest.fixture
def attached(tmp_path: Path) -> Iterator[tuple[FakeCore, AttachedEngine, Watcher]]:
    address = ipc_address(tmp_path)
    publisher = FactsPublisher(address)
    engine = AttachedEngine(plugin_records(address))
    try:
        yield FakeCore(publisher), engine, Watcher(engine)
    finally:
        engine.shutdown()
        publisher.close()


def _read(watcher: Watcher) -> None:
    """Everything the watch has to report, folded into its ledger (the driver's loop)."""
    engine = watcher.engine
    while engine.has_unfinished():
        watcher.now += 0.01
        watcher.ledger.apply(engine.step(), watcher.now)


KEEPER = 1_000_000  # a request that decodes on: the core steps, and no other request comes


def _run_until_seen(core: FakeCore, watcher: Watcher, numbers: range) -> None:
    """Step the core (a busy server: its own steps answer; an idle core's stack watch is
    tested on its own below) and read the watch, until every request in ``numbers`` ended
    in the watch or was counted unseen."""
    if KEEPER not in core.lengths:
        core.add(KEEPER, 1 << 40)
    wanted = {f"req{n}" for n in numbers}
    deadline = time.monotonic() + 60
    while True:
        _read(watcher)
        ended = wanted & set(watcher.finished())
        if len(ended) + watcher.engine.link().unseen >= len(wanted):
            return
        assert time.monotonic() < deadline, f"{len(wanted - ended)} requests never ended"
        core.step()
        time.sleep(0.002)  # a step's time: a core stepping flat out outruns any watch


def _subscribed(core: FakeCore) -> FactsPublisher:
    """The core's publisher, once the watch's subscription has reached it."""
    publisher = core.capture.sink
    assert isinstance(publisher, FactsPublisher)
    deadline = time.monotonic() + 10
    while not publisher.wanted():
        assert time.monotonic() < deadline, "the watch never subscribed"
        time.sleep(0.01)  # polling: the publisher reads subscriptions, nothing to wait on
    return publisher


def _behind_then_back(core: FakeCore, watcher: Watcher) -> None:
    """The watch reads along, then nothing while a burst comes and goes, then catches up."""
    _subscribed(core)
    core.add(0)
    _run_until_seen(core, watcher, range(1))
    core.burst(1, BURST)  # the watch reads nothing meanwhile
    _run_until_seen(core, watcher, range(BURST + 1))


@pytest.mark.usefixtures("tiny_queues")
def test_records_dropped_by_zmq_are_caught_up_from_the_log_and_no_request_is_lost(
    attached: tuple[FakeCore, AttachedEngine, Watcher],
) -> None:
    core, engine, watcher = attached
    _behind_then_back(core, watcher)
    watched = engine._cores[0]
    assert watched.stream.lost > 0 and watched.catch_up.answered  # records were lost, and asked for
    finished = watcher.finished()
    for n in range(BURST + 1):
        (completion,) = finished[f"req{n}"].completions
        assert list(completion.token_ids) == tokens_of(n, 3), n
        assert completion.finish_reason == "length", n
    assert engine.link().unseen == 0


@pytest.mark.usefixtures("tiny_queues")
def test_requests_caught_up_from_the_log_get_their_text_decoded_here(
    tmp_path: Path, fake_api: FakeApi
) -> None:
    """``--api`` on the server's machine: requests that came and went in records the watch
    lost get their prompt and completion text too, decoded here from the log's token ids
    (before, only the requests whose records it read had text: a starved watch's results
    lost the text of hundreds of a burst's)."""
    fake_api.root = str(write_tokenizer(tmp_path / "model", "w", size=PROMPT + 1000))
    address = ipc_address(tmp_path)
    publisher = FactsPublisher(address)
    engine = AttachedEngine(plugin_records(address), api=ServerApi(fake_api.url + "/v1/"))
    try:
        detokenizer = engine._described.detokenizer  # type: ignore[union-attr]
        wait_until(lambda: detokenizer.local is not None)  # the probes agreed
        core, watcher = FakeCore(publisher), Watcher(engine)
        _behind_then_back(core, watcher)
        assert engine._cores[0].catch_up.answered  # some requests came from the log
        finished = watcher.finished()
        for n in range(BURST + 1):
            view = finished[f"req{n}"]
            assert view.prompt == fake_text([n % 1000 + k for k in range(PROMPT)]), n
            (completion,) = view.completions
            assert completion.text == fake_text(tokens_of(n, 3)), n
        assert len(fake_api.detokenized) == AGREED  # the probes: nothing else was asked
    finally:
        engine.shutdown()
        publisher.close()


@pytest.mark.usefixtures("tiny_queues")
def test_an_idle_core_tells_a_watch_that_lost_its_last_records(
    attached: tuple[FakeCore, AttachedEngine, Watcher], tmp_path: Path
) -> None:
    """zmq drops the end of a burst, the core's idle record among it, and the core goes idle:
    no step comes to tell the watch, which showed the burst's requests as held for as long as
    the server stayed idle. The plug-in's stack watch now takes the core's part while it idles
    (it sends the idle record again and answers what that makes the watch ask): every
    request ends in the watch, with its own tokens and reason, none unseen."""
    core, engine, watcher = attached
    publisher = _subscribed(core)
    core.burst(0, BURST)  # the watch reads nothing meanwhile; the core ends idle
    capture, scheduler = core.capture, core.scheduler
    stacks = StackWatch(
        lambda: capture.step,
        core_busy(scheduler),
        publisher=publisher,
        folder=tmp_path,
        after=0,
        wake=0.05,
        idle=lambda: capture.while_idle(scheduler),
    )
    stacks.start(answer_signal=False)
    try:
        wanted = {f"req{n}" for n in range(BURST)}
        deadline = time.monotonic() + 30
        while len(wanted & set(watcher.finished())) + engine.link().unseen < BURST:
            assert time.monotonic() < deadline, "the watch never learnt the burst had ended"
            _read(watcher)
            time.sleep(0.02)  # the watch's own pace: the idle core speaks twice a second
    finally:
        stacks.close()
    watched = engine._cores[0]
    assert watched.stream.lost > 0  # records were lost (the idle one too: nothing else came)
    finished = watcher.finished()
    for n in range(BURST):
        (completion,) = finished[f"req{n}"].completions
        assert list(completion.token_ids) == tokens_of(n, 3), n
        assert completion.finish_reason == "length", n
    assert engine.link().unseen == 0
    assert not watcher.active()


@pytest.mark.usefixtures("tiny_queues")
def test_with_a_log_too_small_only_what_fell_out_of_it_is_counted_unseen(
    attached: tuple[FakeCore, AttachedEngine, Watcher], monkeypatch: pytest.MonkeyPatch
) -> None:
    core, engine, watcher = attached
    publisher = core.capture.sink
    assert isinstance(publisher, FactsPublisher)
    monkeypatch.setenv("STEPVIEW_END_LOG", "100")  # and the ids of 500 that fell out
    publisher.end_log = publisher_module.EndLog.from_env()
    _behind_then_back(core, watcher)
    finished = watcher.finished()
    seen = [n for n in range(BURST + 1) if f"req{n}" in finished]
    unseen = engine.link().unseen
    assert unseen > 0 and len(seen) + unseen == BURST + 1  # each request once: ended or counted
    told = [n for n in seen if finished[f"req{n}"].completions[0].finish_reason == "length"]
    assert len(told) >= 100  # the log's, at least, ended with what the log said


def test_a_headless_watch_stopped_past_its_link_loses_no_request(tmp_path: Path) -> None:
    """``SIGSTOP`` for longer than the heartbeats allow: the plug-in drops the link (and
    builds no record while nobody listens), logs the ends on for the linger, and the watch
    that comes back asks for them: its results file holds every request, once."""
    address = ipc_address(tmp_path)
    results = tmp_path / "results.jsonl"
    publisher = FactsPublisher(address)
    core = FakeCore(publisher)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}

    def written() -> list[str]:
        return result_ids(results)

    def polled(condition: Callable[[], bool], what: str, step: bool = False) -> None:
        """Poll ``condition`` (a child's file, the publisher's link); with ``step``, the core
        steps meanwhile, a one-token request arriving each time (a busy server; the test has
        no stack watch to answer for an idle core)."""
        deadline = time.monotonic() + 60
        while not condition():
            assert time.monotonic() < deadline, what
            if step:
                core.add(len(core.lengths), 1)
                core.step()
            time.sleep(0.02)  # polling another process's doing: nothing here to wait on

    try:
        with watching([*watch_command(address, tmp_path), "--results", str(results)], env) as w:
            polled(publisher.wanted, "the watch never subscribed")
            core.burst(0, 5)
            polled(lambda: len(written()) == 5, "the watch wrote nothing")
            w.child.send_signal(signal.SIGSTOP)
            try:
                polled(lambda: not publisher.wanted(), "the heartbeats never dropped the link")
                core.burst(5, 200)  # nobody listens: no record is built, the ends are logged
            finally:
                w.child.send_signal(signal.SIGCONT)
            polled(lambda: len(set(written())) >= len(core.lengths), "requests missing", True)
            w.child.send_signal(signal.SIGINT)
            assert w.child.wait(60) == 0
            assert not [line for line in w.err.rest() if "unseen" in line]
    finally:
        publisher.close()
    ids = written()
    assert sorted(ids) == sorted(f"req{n}" for n in core.lengths)  # every one, once


def test_a_plugin_that_never_answers_is_waited_for_once(
    server: Server, engine: AttachedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older plug-in has no log: the record after a gap waits for its answer once (here
    0.2 s), then the watch goes on as before and never waits for that plug-in again."""
    monkeypatch.setattr(catching_up, "CATCH_UP_WAIT_S", 0.2)
    watcher = Watcher(engine)
    server.send(record(1, request("a-0123abcd")))
    watcher.step()
    # (The test's publisher reads no subscription after the first: it answers nothing.)
    server.send(record(5, request("b-0123abcd")))  # records 2 to 4 never came
    result = watcher.step()  # held, then read all the same
    assert [e.request_id for e in result.ended] == ["a"]
    watched = engine._cores[0]
    assert watched.catch_up.unanswered and not watched.catch_up.answered
    later = record(9, request("c-0123abcd"))
    server.send(later)
    wait_until(engine.has_unfinished)  # (it says so only of a record it may read now)
    assert watched.catch_up.after is not None  # asked again ...
    assert not watched.catch_up.holds(later)  # ... but that record does not wait for it
    watcher.step()
    assert "c" in watcher.active()
