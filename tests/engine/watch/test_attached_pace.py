"""A fleet's watch reads its records at a pace: what came since the last read as one step.

64 servers stepping 20 times a second are 1 280 records a second for one stepview; the fleet
screen needs each server's figures, not its steps (see stepview.engine.watch.link.backlog). These
tests hold the records in the watch's backlog before it reads them (no race with delivery)
and check that nothing is lost by reading them together, and that a server's full view
(``every`` set to 0) gets each step again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stepview.engine.watch.link.attached import AttachedEngine
from stepview.engine.watch.link.backlog import ReadPace
from stepview.model.address import plugin_records
from tests.engine.watch.attach_helpers import Clock, Server, Watcher, record, request, wait_until


@pytest.fixture
def pace() -> ReadPace:
    return ReadPace(every=0.05)


@pytest.fixture
def paced(server: Server, clock: Clock, pace: ReadPace) -> Iterator[AttachedEngine]:
    e = AttachedEngine(plugin_records(server.address), clock=clock, pace=pace)
    server.wait_subscribed()
    yield e
    e.shutdown()


def _received(engine: AttachedEngine, count: int) -> None:
    """Wait until ``count`` records wait in the watch's backlog, none read yet."""
    wait_until(lambda: engine.has_unfinished() and len(engine._backlog) == count)


def _tokens(step: int) -> dict[str, object]:
    """Record ``step`` of one request that gains a token each step (token ``step``)."""
    return {"outputs": step, "new": [step], "intro": step == 1}


def test_records_that_came_since_the_last_read_are_one_step_with_every_token(
    server: Server, paced: AttachedEngine
) -> None:
    watcher = Watcher(paced)
    server.send(*(record(s, request("r-0123abcd", **_tokens(s)), full=s == 1) for s in (1, 2)))
    _received(paced, 2)
    result = watcher.step()  # both as one step: the request arrived with two tokens
    assert [a.request_id for a in result.arrived] == ["r"]
    assert result.counters.generation_tokens == 2
    server.send(*(record(s, request("r-0123abcd", **_tokens(s)), full=False) for s in (3, 4, 5)))
    _received(paced, 3)
    result = watcher.step()
    assert result.counters.generation_tokens == 3
    assert list(watcher.active()["r"].completions[0].token_ids) == [1, 2, 3, 4, 5]


def test_a_full_view_reads_each_record_as_a_step_again(
    server: Server, paced: AttachedEngine, pace: ReadPace
) -> None:
    watcher = Watcher(paced)
    server.send(record(1, request("r-0123abcd", **_tokens(1))))
    watcher.step()
    pace.every = 0.0  # the fleet opened this server's view
    server.send(*(record(s, request("r-0123abcd", **_tokens(s)), full=False) for s in (2, 3)))
    _received(paced, 2)
    assert watcher.step().counters.generation_tokens == 1
    assert watcher.step().counters.generation_tokens == 1
    assert list(watcher.active()["r"].completions[0].token_ids) == [1, 2, 3]
