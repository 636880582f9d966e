"""``--api``: prompts added while attached go through the server's completions endpoint.

A small stdlib HTTP server plays vLLM's OpenAI-compatible API (:mod:`tests.engine.watch.fake_api`)
and a :class:`Server` publishes the engine core's records, so each test sees a request
stepview sent both ways: in the records (under stepview's own id) and in the HTTP answer
that finishes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from stepview.engine.records.facts import EndedFacts
from stepview.engine.watch.api.server_api import ApiError, ServerApi, api_client_id, completion_body
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.model.address import plugin_records
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState
from tests.engine.watch.attach_helpers import (
    ANSWER,
    Server,
    Watcher,
    ipc_address,
    next_step,
    record,
    request,
    wait_until,
)
from tests.engine.watch.fake_api import FakeApi

S = RequestState


@pytest.fixture
def engine(server: Server, api: ServerApi) -> Iterator[AttachedEngine]:
    e = AttachedEngine(plugin_records(server.address), api=api)
    server.wait_subscribed()
    yield e
    e.shutdown()


def test_the_form_becomes_a_completions_request() -> None:
    spec = SamplingSpec(temperature=0.5, top_k=5, max_tokens=9, n=2, seed=3, stop=("\n",))
    body = completion_body("tiny", "stepview-x-u1", "Hello", spec)
    assert body["model"] == "tiny" and body["prompt"] == "Hello"
    assert body["request_id"] == "stepview-x-u1" and body["return_token_ids"] is True
    assert (body["temperature"], body["top_k"], body["max_tokens"], body["n"]) == (0.5, 5, 9, 2)
    assert (body["seed"], body["stop"]) == (3, ["\n"])
    assert "logprobs" not in body
    # Off is sent too: left out, the server would use the model's generation config's top_k.
    assert completion_body("m", "i", "p", SamplingSpec())["top_k"] == 0


def test_a_prompt_sent_through_the_api_is_followed_and_finished_by_its_answer(
    server: Server, engine: AttachedEngine, api: ServerApi, fake_api: FakeApi
) -> None:
    watcher = Watcher(engine)
    watcher.ledger.accept(AddRequest("u1", "Hello", SamplingSpec(temperature=0, max_tokens=3)))
    watcher.ledger.admit(engine)
    wait_until(lambda: len(fake_api.bodies) == 1)
    body = fake_api.bodies[0]
    assert (body["model"], body["prompt"], body["max_tokens"]) == ("tiny", "Hello", 3)
    core_id = f"{api_client_id(body['request_id'])}-0123abcd"

    server.send(record(1, request(core_id, outputs=2, new=[7, 8], prompt=2)))
    result = watcher.step()
    assert result.arrived == ()  # stepview's own: known, not adopted
    assert result.scheduled is not None and set(result.scheduled) == {"u1"}
    assert list(watcher.active()["u1"].completions[0].token_ids) == [7, 8]
    # Gone from the record: it waits for its answer, which says how it really ended.
    server.send(
        record(
            2, idle=True, finished=[core_id], ended=[EndedFacts(core_id, 3, [7, 8, 9], "length")]
        )
    )
    assert watcher.step().ended == ()
    assert list(watcher.active()["u1"].completions[0].token_ids) == [7, 8, 9]
    assert watcher.active()["u1"].completions[0].finish_reason is None
    fake_api.answer = ANSWER
    fake_api.release.set()
    watcher.step()
    done = watcher.finished()["u1"]
    assert done.state is S.FINISHED
    (sample,) = done.completions
    assert (sample.text, list(sample.token_ids), sample.finish_reason) == (
        " world!",
        [7, 8, 9],
        "length",
    )
    assert done.prompt_token_ids == (1, 2)
    assert fake_api.detokenized == []  # its text is the form's and the answer's: none decoded
    assert engine.info.model == f"tiny @ {server.address}"
    assert (engine.info.max_model_len, engine.info.vllm_version) == (512, "0.32.0")


def test_the_servers_refusal_rejects_the_request_with_its_message(
    engine: AttachedEngine, fake_api: FakeApi
) -> None:
    fake_api.refuse = "This model's maximum context length is 512 tokens."
    engine.add_request("u2", "x" * 10, SamplingSpec())
    result = next_step(engine)
    assert [(e.request_id, e.state, e.reason) for e in result.ended] == [
        ("u2", S.REJECTED, "This model's maximum context length is 512 tokens.")
    ]


def test_an_unreachable_api_rejects_and_a_lost_answer_aborts(tmp_path: Path) -> None:
    unreachable = ServerApi("http://127.0.0.1:9")  # discard port: nothing listens
    with pytest.raises(ApiError):
        unreachable.model()
    engine = AttachedEngine(plugin_records(ipc_address(tmp_path)), api=unreachable)
    try:
        engine.add_request("u3", "hi", SamplingSpec())
        (ended,) = next_step(engine).ended
        assert (ended.request_id, ended.state) == ("u3", S.REJECTED)
    finally:
        engine.shutdown()


def test_aborting_a_request_sent_through_the_api_closes_its_connection(
    engine: AttachedEngine, fake_api: FakeApi
) -> None:
    engine.add_request("u4", "hi", SamplingSpec())
    wait_until(lambda: len(fake_api.bodies) == 1)
    engine.abort(["u4"])
    (ended,) = next_step(engine).ended
    assert (ended.request_id, ended.state, ended.reason) == ("u4", S.ABORTED, "aborted by the user")


@pytest.mark.parametrize("url", ["localhost:8000", "ftp://x", "http://"])
def test_a_bad_api_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="not an http"):
        ServerApi(url)
