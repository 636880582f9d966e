"""Record a run, read it back: the replay shows exactly what the live run showed, step by step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepview.engine.driver.loop import Driver
from stepview.files.records import request_record
from stepview.files.results_file import ResultsWriter
from stepview.model.commands import Abort, Pause, Resume, SingleStep
from stepview.model.grow import Frozen
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import (
    Completion,
    EngineCounters,
    EngineInfo,
    EngineState,
    LogprobEntry,
    RecentStep,
    RequestState,
    RequestView,
    StepSnapshot,
    Timings,
)
from stepview.testing.fake_engine import FakeEngine
from stepview.trace.format import TRACE_KIND, TRACE_VERSION
from stepview.trace.reader import load_trace
from stepview.trace.recorder import TraceRecorder
from tests.helpers import all_done, wait_for
from tests.trace.compare import assert_same_run
from tests.trace.runs import add, record, run_to_end, write_trace


def _mixed(driver: Driver) -> None:
    """Every kind of request and user action the driver knows."""
    driver.send(Pause())
    add(driver, "greedy-lp", "A robot may not injure a human being", temperature=0.0, logprobs=2)
    add(driver, "prompt-lp", "To be or not to be", prompt_logprobs=1, max_tokens=4, seed=3)
    add(driver, "two", "What is the meaning of life?", n=2, temperature=0.8, seed=1, max_tokens=9)
    add(driver, "stop", "x" * 20, stop=(" cache",), max_tokens=40, seed=5)
    add(driver, "pending-abort", max_tokens=30)
    add(driver, "bad", temperature=-1.0)
    add(driver, "empty", "")
    add(driver, "two", "a duplicate id")
    # Paused: everything waits as pending (bad ones are refused when handed to the engine).
    wait_for(driver, lambda s: len(s.active) == 7 and len(s.finished) == 1)
    driver.send(Abort("pending-abort"))
    driver.send(SingleStep())
    wait_for(driver, lambda s: s.step == 1)
    for i in range(6):  # more than the fake engine's seats and KV blocks: preemption
        add(driver, f"long{i}", "y" * 40, max_tokens=30 + i, temperature=0.5, seed=i)
    for _ in range(8):
        driver.send(SingleStep())
    wait_for(driver, lambda s: s.step == 9)
    driver.send(Abort("long5"))
    driver.send(Resume())
    run_to_end(driver, 14)


def test_replay_equals_live_for_every_kind_of_request(tmp_path: Path) -> None:
    engine = FakeEngine(num_kv_blocks=14, max_num_batched_tokens=64)
    driver, trace_path, results_path = record(tmp_path, _mixed, engine)
    live = driver.history()
    trace = load_trace(trace_path)
    assert trace.warning is None and trace.complete
    assert_same_run(live, trace.snapshots)
    final = live[-1]
    assert final.engine_state is EngineState.STOPPED
    assert sum(v.num_preemptions for v in final.finished) > 0  # the scenario covered preemption
    # Events: one add per request (the duplicate included), then aborts and rejections.
    kinds = [(e.kind, e.request_id) for e in trace.events]
    assert sorted(rid for kind, rid in kinds if kind == "add") == sorted(
        ["greedy-lp", "prompt-lp", "two", "two", "stop", "pending-abort", "bad", "empty"]
        + [f"long{i}" for i in range(6)]
    )
    assert {(k, r) for k, r in kinds if k != "add"} == {
        ("reject", "bad"),
        ("reject", "empty"),
        ("reject", "two"),
        ("abort", "pending-abort"),
        ("abort", "long5"),
    }
    add_event = next(e for e in trace.events if e.request_id == "stop")
    assert add_event.prompt == "x" * 20 and add_event.spec == SamplingSpec(
        stop=(" cache",), max_tokens=40, seed=5
    )
    # The results file holds every final request, as request_record, in order of finishing.
    # (plus the run insight's timeline and preemptions; tests/insight checks those).
    lines = results_path.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert all("timeline" in r and "preemptions" in r for r in records)
    insight_keys = ("timeline", "preemptions")
    assert [{k: v for k, v in r.items() if k not in insight_keys} for r in records] == [
        request_record(v) for v in final.finished
    ]


@pytest.mark.parametrize("late", [False, True], ids=["fields", "callable"])
def test_header_carries_the_started_engine(tmp_path: Path, late: bool) -> None:
    """Header fields may be given up front or, when only the engine thread learns them (vLLM's
    flags are parsed there), as a callable asked when the header is written."""
    fields = {"vllm": "0.32.0", "model": "tiny", "engine_args": {"max_model_len": 512}}

    def one(driver: Driver) -> None:
        add(driver, "a", max_tokens=2)
        run_to_end(driver, 1)

    header_fields = (lambda: fields) if late else fields
    _, trace_path, _ = record(
        tmp_path, one, FakeEngine(model="fake-x"), header_fields=header_fields
    )
    header = json.loads(trace_path.read_text(encoding="utf-8").splitlines()[0])
    assert header["kind"] == TRACE_KIND and header["version"] == TRACE_VERSION
    assert header["vllm"] == "0.32.0" and header["model"] == "tiny"
    assert header["engine_args"] == {"max_model_len": 512}
    assert header["info"]["model"] == "fake-x"  # the engine's, not the start-up placeholder
    assert header["stepview"] and header["created"]
    assert load_trace(trace_path).info.model == "fake-x"


def test_long_run_keeps_the_sparkline_window(tmp_path: Path) -> None:
    """Past the driver's window of recent steps, entries drop from the front as in the live run."""

    def long(driver: Driver) -> None:
        add(driver, "long", "z", max_tokens=200, temperature=0.0)
        run_to_end(driver, 1)

    driver, trace_path, _ = record(tmp_path, long)
    live = driver.history()
    assert len(live[-1].recent) < live[-1].step  # the window is full and sliding
    assert_same_run(live, load_trace(trace_path).snapshots)


def test_engine_that_never_starts_still_leaves_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "failed.jsonl"

    def factory(phase):  # type: ignore[no-untyped-def]
        phase("loading weights")
        raise FileNotFoundError("no such model: /nope")

    driver = Driver(factory, history_size=100, sinks=[TraceRecorder(path)])
    driver.start()
    wait_for(driver, lambda s: s.engine_state is EngineState.ERROR)
    driver.stop()
    trace = load_trace(path)
    assert_same_run(driver.history(), trace.snapshots)
    assert "no such model" in trace.snapshots[-1].phase


def _view(rid: str, **changes: object) -> RequestView:
    base = RequestView(rid, f"prompt {rid}", SamplingSpec(), RequestState.WAITING, Timings(0.5))
    return base._replace(**changes)  # type: ignore[arg-type]


def test_changes_the_driver_never_makes_still_round_trip(tmp_path: Path) -> None:
    """Text that is rewritten rather than extended, token lists replaced, logprobs dropped,
    samples removed, reordering, requests leaving without finishing, a reset sparkline window:
    the format falls back to full values and stays exact."""
    lp = (LogprobEntry(5, -0.5, 1, "a"), LogprobEntry(6, -1.5, 2, None))
    c1 = Completion.of_text(
        0,
        "hello wor",
        token_ids=Frozen([1, 2, 3]),
        cumulative_logprob=-1.0,
        logprobs=Frozen([lp, lp, lp]),
    )
    c1b = Completion.of_text(
        0, "hello w\N{LATIN SMALL LETTER E WITH ACUTE}", token_ids=Frozen([1, 9])
    )
    c2 = Completion.of_text(1, "other", token_ids=Frozen([7]), finish_reason="stop", stop_reason=42)
    a1 = _view("a", state=RequestState.DECODING, completions=(c1, c2), prompt_token_ids=(1, 2))
    a2 = a1._replace(completions=(c1b,), prompt_logprobs=(None, lp), error="odd")
    b1 = _view("b", spec=SamplingSpec(temperature=0.0, stop=("x",)))
    b2 = b1._replace(prompt="a new prompt", spec=SamplingSpec(n=3, temperature=0.7))
    c = _view("c")
    stats = tuple(RecentStep(i, i * 0.1, 0.01, 1, 0, 0.5, 1) for i in range(6))
    info2 = EngineInfo(model="swapped", max_num_seqs=3)
    finished_list = [c._replace(state=RequestState.FINISHED)]

    def snap(step: int, active: tuple[RequestView, ...], **kw: object) -> StepSnapshot:
        return StepSnapshot(step, step * 1.0, EngineState.RUNNING, active=active, **kw)  # type: ignore[arg-type]

    snapshots = [
        snap(0, (a1, b1, c), recent=stats[:3], counters=EngineCounters(running=2)),
        snap(1, (b1, a1, c), recent=stats[1:4], phase="reordered"),  # order changed
        snap(2, (b2, a2), recent=stats[3:5], info=info2),  # c gone; window shrank
        snap(3, (b2, a2), recent=(stats[0], stats[5]), finished=Frozen(finished_list)),  # reset
        snap(4, (a2,), recent=(), finished=Frozen(finished_list), total_generated=7),  # b gone
    ]
    path = tmp_path / "odd.jsonl"
    write_trace(path, snapshots)
    trace = load_trace(path)
    assert trace.warning is None
    assert_same_run(snapshots, trace.snapshots)
    text = path.read_text(encoding="utf-8")
    assert '"x":"hello w\u00e9"' in text  # rewritten text written whole, not as a suffix
    assert '"order":["b","a","c"]' in text


def test_unchanged_requests_share_objects_and_storage(tmp_path: Path) -> None:
    def two(driver: Driver) -> None:
        add(driver, "a", max_tokens=40, temperature=0.0, logprobs=1)
        add(driver, "b", max_tokens=5, temperature=0.0)
        run_to_end(driver, 2)

    _, trace_path, _ = record(tmp_path, two)
    snapshots = load_trace(trace_path).snapshots
    views = [s.find("a") for s in snapshots]
    tokens = [v.completions[0].token_ids for v in views if v is not None and v.completions]
    assert len(tokens) > 30
    # One growing list behind every step's token view, each view frozen at its own length.
    assert all(isinstance(t, Frozen) and t._items is tokens[-1]._items for t in tokens)
    assert [len(t) for t in tokens] == sorted(len(t) for t in tokens)


def test_a_failing_disk_stops_the_files_not_the_engine(tmp_path: Path) -> None:
    """/dev/full accepts the open and fails every write with ENOSPC, like a full disk."""
    recorder = TraceRecorder("/dev/full")
    results = ResultsWriter("/dev/full")
    driver = Driver(lambda phase: FakeEngine(), sinks=[recorder, results])
    driver.start()
    try:
        add(driver, "a", max_tokens=5)
        add(driver, "b", max_tokens=8)
        final = wait_for(driver, lambda s: len(s.finished) == 2 and all_done(s))
    finally:
        driver.stop()
    assert driver.error is None
    assert all(v.state is RequestState.FINISHED for v in final.finished)
    for sink in (recorder, results):
        assert sink.error is not None and "No space left" in sink.error
    assert recorder.snapshots_written == 0 and results.results_written == 0
