"""Arrivals on the driver's clock: the queue, the driver, and a prompts file's "at"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepview.engine.driver.arrivals import ArrivalQueue
from stepview.engine.driver.loop import Driver
from stepview.files.prompts_file import PromptsFileError, prompt_commands, read_timed_prompts
from stepview.model.commands import AddRequest, Arrival, Schedule
from stepview.model.load import LenRange, LoadSpec, plan_load
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import ArrivalCount, RequestState
from stepview.testing.fake_engine import FakeEngine
from tests.helpers import wait_for


def _request(request_id: str) -> AddRequest:
    return AddRequest(request_id, "hi", SamplingSpec(max_tokens=2))


def test_queue_releases_due_requests_in_order_and_says_how_long_to_sleep() -> None:
    queue = ArrivalQueue()
    queue.schedule(Schedule((Arrival(2.0, _request("b")), Arrival(1.0, _request("a")))), now=10.0)
    assert queue.wait(10.0, longest=0.05) == 0.05
    assert queue.wait(10.99, longest=0.05) == pytest.approx(0.01)
    assert queue.due(10.5) == []
    assert [r.request_id for r in queue.due(12.0)] == ["a", "b"]
    assert queue.count == ArrivalCount(2, 2)
    assert not queue.waiting


def test_driver_adds_scheduled_requests_when_their_time_comes() -> None:
    engine = FakeEngine(max_num_seqs=8)
    driver = Driver(lambda phase: engine)
    driver.start()
    try:
        arrivals = tuple(Arrival(0.3 * i, _request(f"r{i}")) for i in range(3))
        driver.send(Schedule(arrivals))
        first = wait_for(driver, lambda s: s.arrivals.arrived >= 1)
        assert first.arrivals.total == 3
        done = wait_for(driver, lambda s: len(s.finished) == 3, timeout=10)
    finally:
        driver.stop()
    times = sorted(v.timings.arrival for v in done.finished)
    # Never before its time (the driver sleeps until the next one is due); how late one comes
    # is the machine's (a loaded one wakes the driver late), so only "late, not lost" is held.
    assert times[1] - times[0] >= 0.3 - 0.01 and times[2] - times[0] >= 0.6 - 0.01, times
    assert times[2] - times[0] < 0.6 + 5.0, times
    assert all(v.state is RequestState.FINISHED for v in done.finished)


def test_driver_runs_a_load_with_exact_prompt_and_output_lengths() -> None:
    engine = FakeEngine(max_num_seqs=4, num_kv_blocks=256)
    driver = Driver(lambda phase: engine)
    driver.start()
    spec = LoadSpec(count=12, input_len=LenRange(3, 9), output_len=LenRange(2, 5))
    try:
        driver.send(Schedule(plan_load(spec)))
        done = wait_for(driver, lambda s: len(s.finished) == 12, timeout=10)
    finally:
        driver.stop()
    plan = {a.request.request_id: a.request for a in plan_load(spec)}
    for view in done.finished:
        asked = plan[view.request_id]
        assert view.prompt_tokens == len(asked.prompt_token_ids)
        assert view.output_tokens == asked.spec.max_tokens
    assert done.arrivals == ArrivalCount(12, 12)


def test_prompts_file_at_is_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    lines = [{"prompt": "a"}, {"prompt": "b", "at": 1.5}, {"prompt": "c", "at": 0}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert [at for at, _ in read_timed_prompts(path)] == [None, 1.5, 0.0]
    commands = prompt_commands(path)
    assert isinstance(commands[0], AddRequest)
    assert isinstance(commands[1], Schedule)
    assert [(a.at, a.request.prompt) for a in commands[1].arrivals] == [(1.5, "b"), (0.0, "c")]


@pytest.mark.parametrize("at", [-1, "2", True, None])
def test_prompts_file_refuses_a_bad_at(tmp_path: Path, at: object) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"prompt": "a", "at": at}) + "\n")
    if at is None:
        assert read_timed_prompts(path) == [(None, AddRequest("0", "a", SamplingSpec()))]
        return
    with pytest.raises(PromptsFileError, match=r'p\.jsonl:1: "at" must be a number'):
        read_timed_prompts(path)
