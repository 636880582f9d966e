"""``--attach ... --api`` on the server's machine: other clients' text decoded here, once it agreed.

The fake API (:mod:`tests.engine.watch.fake_api`) decodes token ``t`` as `` wT`` and says, as
vLLM's ``/v1/models`` does, which folder its model was loaded from; there the test writes a
real ``tokenizers`` tokenizer. One that decodes as the server does is used once
:data:`~stepview.engine.watch.link.local_text.AGREED` probes, decoded both ways as the watch
starts, came out alike (or, if the server could not answer them, as many real texts), and the
server is asked nothing more; one that decodes otherwise is dropped, and the server is asked
for every text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stepview.engine.records.facts import EndedFacts
from stepview.engine.watch.api.server_api import ServerApi
from stepview.engine.watch.link import detokenize
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.engine.watch.link.local_text import AGREED, local_text
from stepview.model.address import plugin_records
from stepview.model.snapshot import RequestView
from tests.engine.watch.attach_helpers import (
    Clock,
    Server,
    Watcher,
    record,
    request,
    wait_until,
)
from tests.engine.watch.fake_api import FakeApi, fake_text, write_tokenizer

LOGGER = "stepview.engine.watch.link.detokenize"
# Three other clients' requests (one with two samples): 4 texts to ask, 2 prompts and 3
# completions, more than AGREED.
A = "cmpl-0123456789abcdef-0-0123abcd"
B0 = "0_cmpl-fedcba9876543210-0-89abcdef"
B1 = "1_cmpl-fedcba9876543210-0-89abcdef"


@pytest.fixture
def attach(server: Server, api: ServerApi, clock: Clock) -> Iterator[Callable[[], AttachedEngine]]:
    """Attaches once called: after the test has said where the model's folder is (the engine
    asks ``/v1/models`` as it starts)."""
    engines: list[AttachedEngine] = []

    def attach_() -> AttachedEngine:
        engines.append(AttachedEngine(plugin_records(server.address), api=api, clock=clock))
        server.wait_subscribed()
        return engines[-1]

    yield attach_
    for engine in engines:
        engine.shutdown()


def run_three(server: Server, engine: AttachedEngine) -> dict[str, RequestView]:
    """The three requests arrive, run a step and end; their finished views."""
    watcher = Watcher(engine)
    running = (
        request(A, prompt=4, outputs=1, new=[7]),
        request(B0, prompt=3),
        request(B1, prompt=3),
    )
    server.send(record(1, *running))
    watcher.step()
    ends = [
        EndedFacts(A, 3, [7, 8], "length"),
        EndedFacts(B0, 2, [5, 6], "length"),
        EndedFacts(B1, 2, [9, 10], "length"),
    ]
    server.send(record(2, idle=True, finished=[A, B0, B1], ended=ends))
    watcher.step()  # held until every text is in (the clock stands still)
    return watcher.finished()


def texts(finished: dict[str, RequestView]) -> dict[str, tuple[str, list[str | None]]]:
    return {rid: (v.prompt, [c.text for c in v.completions]) for rid, v in finished.items()}


EXPECTED = {
    "01234567": (fake_text(range(100, 104)), [fake_text([7, 8])]),
    "fedcba98": (fake_text(range(100, 103)), [fake_text([5, 6]), fake_text([9, 10])]),
}


@pytest.mark.parametrize(
    ("word", "failing", "calls", "said"),
    [
        # Decoded both ways as the watch started (the probes); no text asked of the server.
        ("w", 0, AGREED, "decoded here with the tokenizer in"),
        # The server could not answer the first probe: its first three texts are compared.
        ("w", 1, 1 + AGREED, "decoded here with the tokenizer in"),
        # A tokenizer that decodes otherwise: one probe, then every text asked of the server.
        ("x", 0, 1 + 5, "decodes differently"),
    ],
    ids=["agrees", "agrees-on-texts", "differs"],
)
def test_a_tokenizer_is_used_here_once_it_agreed_with_the_server(
    tmp_path: Path,
    server: Server,
    fake_api: FakeApi,
    attach: Callable[[], AttachedEngine],
    caplog: pytest.LogCaptureFixture,
    word: str,
    failing: int,
    calls: int,
    said: str,
) -> None:
    folder = write_tokenizer(tmp_path / "model", word)
    fake_api.root = str(folder)
    fake_api.failing = failing
    caplog.set_level(logging.INFO, logger=LOGGER)
    assert texts(run_three(server, attach())) == EXPECTED  # the server's text, every one
    assert len(fake_api.detokenized) == calls
    if calls == AGREED:
        assert fake_api.detokenized == local_text(str(folder)).probes()  # type: ignore[union-attr]
    logged = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(logged) == 1 and said in logged[0]


def test_questions_wait_for_the_probes_and_none_is_dropped(
    tmp_path: Path,
    server: Server,
    fake_api: FakeApi,
    attach: Callable[[], AttachedEngine],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A burst that begins while the probes are out: its questions wait (asked of nobody),
    beyond the queue's usual bound, and are decoded here once the probes agreed. (Before, a
    long_queue round lost the text of 2 003 of its 4 000 requests that way.)"""
    monkeypatch.setattr(detokenize, "MAX_QUEUED", 1)
    fake_api.root = str(write_tokenizer(tmp_path / "model", "w"))
    fake_api.decoding.clear()  # the probes' answers wait
    engine = attach()
    watcher = Watcher(engine)
    server.send(record(1, request(A, prompt=4), request(B0, prompt=3), request(B1, prompt=3)))
    watcher.step()
    detokenizer = engine._described.detokenizer  # type: ignore[union-attr]
    wait_until(lambda: fake_api.posts.count("/detokenize") == 1)  # the first probe, held
    assert detokenizer.done == 0  # two prompts queued, none dropped past the bound of 1
    fake_api.decoding.set()
    wait_until(lambda: detokenizer.local is not None and detokenizer.done == 2)
    server.send(record(2, request(A, prompt=4), request(B0, prompt=3), request(B1, prompt=3)))
    watcher.step()
    prompts = {rid: view.prompt for rid, view in watcher.active().items()}
    assert prompts == {rid: prompt for rid, (prompt, _) in EXPECTED.items()}
    assert len(fake_api.detokenized) == AGREED  # the probes only


def test_only_a_readable_tokenizer_folder_without_clean_up_is_used(tmp_path: Path) -> None:
    folder = write_tokenizer(tmp_path / "model", "w")
    found = local_text(str(folder))
    assert found is not None and found.decode([1, 2]) == " w1 w2"
    assert local_text("") is None
    assert local_text(str(tmp_path / "absent")) is None  # another machine's folder, a hub id
    (folder / "tokenizer_config.json").write_text('{"clean_up_tokenization_spaces": true}')
    assert local_text(str(folder)) is None  # transformers' clean-up is not redone here
    (folder / "tokenizer_config.json").write_text("{not json")
    assert local_text(str(folder)) is None
    (folder / "tokenizer_config.json").unlink()
    (folder / "tokenizer.json").write_text("{}")
    assert local_text(str(folder)) is None  # not a tokenizer
