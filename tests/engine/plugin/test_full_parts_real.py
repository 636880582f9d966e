"""A watch joining a server that holds thousands of requests, through the plug-in over vLLM's
real scheduler (no model: :mod:`stepview.engine.plugin.selfcheck`, as ``tests/conformance``).

The new subscriber's full record comes in parts over the following steps
(:mod:`stepview.engine.plugin.naming`), each part bounded whatever the core holds; read as one
(:meth:`~stepview.engine.records.stream.RecordStream.take`), it must be the picture a whole
full record built at the last part's step gives: every request held, with the same facts,
states and reasons. Requests that change on the way (scheduled, arrived, aborted before
their part came) are all in it too, and a watch reading it sees every one of them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from stepview.engine.records.channel import FULL_PART_ENV
from stepview.engine.records.entries import EntryReader
from stepview.engine.records.facts import StepFacts, decode_facts, encode_facts
from stepview.engine.records.stream import RecordStream
from stepview.model.address import zmq_endpoint

pytestmark = pytest.mark.engine

MAX_NUM_SEQS = 8


class JoiningSink:
    """A publisher as the plug-in sees it: nobody listens until a watch joins."""

    tails = True

    def __init__(self) -> None:
        self.records: list[StepFacts] = []
        self.listening = False
        self.fresh = False

    def wanted(self) -> bool:
        return self.listening

    def deliver(self, facts: StepFacts) -> None:
        self.records.append(decode_facts(encode_facts(facts)))  # as the watch gets it

    def close(self) -> None:
        pass


@pytest.fixture
def scheduler(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The plug-in over vLLM's scheduler with ``request.param`` KV blocks."""
    from stepview.engine.plugin.selfcheck import Setting, build_scheduler, model_folder

    setting = Setting(max_num_seqs=MAX_NUM_SEQS, token_budget=256, num_blocks=request.param)
    with model_folder() as folder:
        built = build_scheduler(setting, folder, [])
        yield built
        built.shutdown()


def _step(scheduler: Any) -> Any:
    from stepview.engine.plugin.selfcheck import runner_output

    output = scheduler.schedule()
    made = runner_output(scheduler, output)
    return output, lambda: scheduler.update_from_output(output, made)


def _add(scheduler: Any, i: int) -> None:
    from stepview.engine.plugin.selfcheck import make_request

    prompt = [10 + (i * 7 + j) % 900 for j in range(12 + i % 20)]
    scheduler.add_request(make_request(f"cmpl-r{i}-{i:08x}", prompt, 3 + i % 4))


def _picture(facts: StepFacts) -> dict[str, tuple[Any, ...]]:
    """Each request's facts as a watch keeps them, less vLLM's times (sent once each)."""
    return {
        r.req_id: (*msgspec.structs.astuple(r)[:13], r.intro, r.lora_id) for r in facts.requests
    }


# Parts of 100 requests; and parts of 2, fewer than the requests running, whose intros and
# token tails then come over several parts too, with a KV cache small enough for vLLM to
# preempt some of them before their intro came (no longer named by what changed).
@pytest.mark.parametrize(
    ("scheduler", "total", "size"), [(128, 3000, 100), (13, 600, 2)], indirect=["scheduler"]
)
def test_a_watch_joining_thousands_of_held_requests_sees_every_one(
    scheduler: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, total: int, size: int
) -> None:
    from vllm.v1.request import RequestStatus

    from stepview.engine.plugin.capture import CoreCapture
    from stepview.engine.plugin.naming import Naming
    from stepview.engine.plugin.selfcheck import RecordingSink
    from stepview.engine.watch.link.watched_core import WatchedCore

    sink = JoiningSink()
    scheduler._stepview.sink = sink
    scheduler._stepview._naming = Naming(size)  # (STEPVIEW_FULL_PART, read when it is built)
    for i in range(total):
        _add(scheduler, i)
    for _ in range(4):  # nobody listens: no record
        _step(scheduler)[1]()
    assert not sink.records
    held = list(scheduler.requests)
    sink.listening = sink.fresh = True  # a watch subscribes
    stream = RecordStream(lambda: pytest.fail("no record may be lost"))
    aborted = held[-5:]  # the last the parts reach: they leave first
    whole: StepFacts | None = None
    steps = read = 0
    while True:
        output, update = _step(scheduler)
        steps += 1
        for facts in sink.records[read:]:
            whole = stream.take(facts)
        read = len(sink.records)
        if whole is not None:
            break
        update()
        if steps == 2:
            scheduler.finish_requests(aborted, RequestStatus.FINISHED_ABORTED)
            for i in range(total, total + 5):  # arrivals during the parts
                _add(scheduler, i)
        assert steps < 4 * total // size, "the parts never ended"
    parts = sink.records
    assert parts[0].full and parts[0].to_come > 0 and not any(p.full for p in parts[1:])
    assert len(parts) > total // size // 2  # in parts indeed, each bounded, not all at once
    assert max(len(p.requests) for p in parts) <= size + 3 * MAX_NUM_SEQS + 5
    introduced = [sum(1 for r in p.requests if r.intro is not None) for p in parts]
    assert max(introduced) <= size + 10  # a part of what was held; arrivals, aborts
    assert [p.to_come for p in parts] == sorted((p.to_come for p in parts), reverse=True)
    assert parts[-1].to_come == 0 and all(p.to_come for p in parts[:-1])

    # What a whole full record built now says (the plug-in as it was: no parts).
    monkeypatch.setenv(FULL_PART_ENV, "0")
    once = CoreCapture(scheduler)
    once.sink = RecordingSink([])
    preempted = sorted(output.preempted_req_ids)
    before = once.capture(scheduler, output.num_scheduled_tokens, [], preempted, False)
    assert before.full and before.to_come == 0 and len(before.requests) == len(scheduler.requests)

    # Every request held when the watch joined, or that arrived after, is in the picture; the
    # aborted ones with how they ended.
    got = _picture(whole)
    arrived = [f"cmpl-r{i}-{i:08x}" for i in range(total, total + 5)]
    assert set(held) | set(arrived) <= set(got)
    ends = {end.req_id: end.finish_reason for end in whole.ended}
    assert all(ends.get(rid) == "abort" and rid in whole.finished for rid in aborted)
    # ... and the same picture as the whole record: facts, token tails, figures.
    still = {rid: facts for rid, facts in got.items() if rid not in whole.finished}
    assert still == _picture(before)
    tails = {r.req_id: r.new_token_ids for r in whole.requests if r.req_id in still}
    assert tails == {r.req_id: r.new_token_ids for r in before.requests}
    for name in ("num_running", "num_waiting", "kv_free_blocks", "waiting_head", "decode_tokens"):
        assert getattr(whole, name) == getattr(before, name), name

    # The same states and reasons, as the app reads them.
    views = [EntryReader(lambda core_id: core_id) for _ in range(2)]
    entries = [view.read(facts) for view, facts in zip(views, (whole, before), strict=True)]
    assert entries[0] == entries[1] and len(entries[0]) == len(before.requests)
    assert views[0].queue_reason == views[1].queue_reason is not None  # (slots full)

    # A watch reading the picture adopts every request, and ends the aborted ones.
    watch = WatchedCore(0, zmq_endpoint(f"ipc://{tmp_path}/unused.sock"))
    try:
        step = watch.read(whole, time.time(), own={}, awaiting=set(), labelled=False)
        assert len(step.arrived) == len(set(held) | set(arrived)) and watch.unseen == 0
        assert len(watch.samples) == len(still)
        gone = {e.request_id for e in step.ended}
        assert len(gone) == len(aborted)
    finally:
        watch.subscriber.close()
