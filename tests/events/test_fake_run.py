"""The events of a run on the deterministic fake engine: schema, lives, reasons, files.

The same properties are checked on a real vLLM server in ``test_attach_real.py``; here they
run in a second and cover preemption on purpose (a KV cache of a few blocks).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from stepview.engine.driver.loop import Driver
from stepview.events.output import open_events
from stepview.events.spec import EventsSpec, parse_destination
from stepview.files.results_file import ResultsWriter
from stepview.insight.run import RunInsight
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.testing.fake_engine import FakeEngine
from tests.events.checks import (
    check_lives,
    reasons_by_request,
    reasons_of_result,
    validate_all,
)
from tests.helpers import wait_for

REQUESTS = 24


def _read(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def run(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A run of the fake engine with a small KV cache (requests wait and get preempted),
    its events in a file (every step) and its results file beside it."""
    events_path = tmp_path / "events.jsonl"
    results_path = tmp_path / "results.jsonl"
    spec = EventsSpec((parse_destination(str(events_path)),), step_every=0.0)
    output = open_events(spec)
    insight = RunInsight()
    results = ResultsWriter(results_path, annotate=insight.request_fields)
    engine = FakeEngine(max_num_seqs=6, num_kv_blocks=14, block_size=8)
    driver = Driver(
        lambda phase: engine,
        sinks=[results, output.sink()],
        insight=insight,
        history_size=10,
    )
    driver.start()
    for i in range(REQUESTS):
        spec_i = SamplingSpec(max_tokens=12 + i % 5, temperature=0.0)
        driver.send(AddRequest(f"r{i}", "word " * (6 + i % 7), spec_i))
    wait_for(driver, lambda s: len(s.finished) == REQUESTS, timeout=60)
    driver.stop()
    yield events_path, results_path


def test_every_event_fits_the_schema_and_every_request_lives_once(
    run: tuple[Path, Path],
) -> None:
    events = _read(run[0])
    assert validate_all(events) == len(events) > REQUESTS * 4
    check_lives(events, expected=[f"r{i}" for i in range(REQUESTS)])
    kinds = {e["event"] for e in events}
    # The small cache makes requests wait and lose their blocks: every kind a run has.
    assert kinds >= {"arrived", "waiting", "scheduled", "first_token", "finished", "step"}
    assert {"preempted", "resumed"} <= kinds, kinds
    steps = [e["step"] for e in events]
    assert steps == sorted(steps)


def test_waiting_reasons_are_the_results_files(run: tuple[Path, Path]) -> None:
    said = reasons_by_request(_read(run[0]))
    results = {str(r["id"]): r for r in _read(run[1])}
    assert len(results) == REQUESTS
    compared = 0
    for request_id, record in results.items():
        expected = reasons_of_result(record)
        assert said.get(request_id, []) == expected, request_id
        compared += bool(expected)
    assert compared > REQUESTS // 2  # most waited for something
