"""Record a run of real vLLM on the demo model and replay it: the replay equals the live run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepview.cli.args import stepview_parser
from stepview.engine.driver.loop import Driver
from stepview.engine.own.engine_args import EngineArgsHolder, parse_engine_args
from stepview.engine.own.vllm_engine import VllmEngine
from stepview.files.records import request_record
from stepview.files.results_file import ResultsWriter
from stepview.model.commands import Abort, AddRequest
from stepview.model.engine_api import StepResult
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineInfo, RequestState
from stepview.trace.reader import load_trace
from stepview.trace.recorder import TraceRecorder
from tests.helpers import all_done, wait_for
from tests.trace.compare import assert_same_run
from tests.vllm_engines import EnginePool

pytestmark = pytest.mark.engine

# vLLM's llm_engine_example.py prompts and parameters, plus a long tail to fill the batch.
SEED = [
    (
        "A robot may not injure a human being",
        SamplingSpec(temperature=0.0, logprobs=1, prompt_logprobs=1),
    ),
    ("To be or not to be,", SamplingSpec(temperature=0.8, top_k=5, presence_penalty=0.2)),
    (
        "What is the meaning of life?",
        SamplingSpec(n=2, temperature=0.8, top_p=0.95, frequency_penalty=0.1, seed=7),
    ),
]


class _Borrowed:
    """The pool's engine for one driver run: the driver's shutdown must not end it."""

    def __init__(self, engine: VllmEngine) -> None:
        self._engine = engine

    @property
    def info(self) -> EngineInfo:
        return self._engine.info

    def add_request(self, request_id: str, prompt: str, spec: SamplingSpec) -> None:
        self._engine.add_request(request_id, prompt, spec)

    def abort(self, request_ids: list[str]) -> None:
        self._engine.abort(request_ids)

    def has_unfinished(self) -> bool:
        return self._engine.has_unfinished()

    def step(self) -> StepResult:
        return self._engine.step()

    def shutdown(self) -> None:
        """Left to the pool."""


def test_replay_of_a_real_run_equals_the_live_run(engines: EnginePool, tmp_path: Path) -> None:
    engine = _Borrowed(engines.get())
    trace_path, results_path = tmp_path / "real.trace.jsonl", tmp_path / "results.jsonl"
    driver = Driver(
        lambda phase: engine,
        history_size=1_000_000,
        sinks=[
            TraceRecorder(trace_path, {"model": "demo", "engine_args": {"max_num_seqs": 32}}),
            ResultsWriter(results_path),
        ],
    )
    driver.start()
    try:
        for i, (prompt, spec) in enumerate(SEED):
            driver.send(AddRequest(f"seed{i}", prompt, spec))
        for i in range(40):  # more than max_num_seqs (32): some wait, prefill is chunked
            spec = SamplingSpec(
                temperature=0.7, seed=i, max_tokens=12 + i % 9, logprobs=i % 3 or None
            )
            driver.send(AddRequest(f"w{i}", f"def function_{i}(x):" * (1 + i % 4), spec))
        driver.send(AddRequest("too-many-logprobs", "x", SamplingSpec(logprobs=25)))
        driver.send(AddRequest("abort-me", "import os", SamplingSpec(max_tokens=400)))
        wait_for(
            driver, lambda s: any(v.request_id == "abort-me" and v.output_tokens for v in s.active)
        )
        driver.send(Abort("abort-me"))
        final = wait_for(driver, lambda s: len(s.finished) == 45 and all_done(s), timeout=120)
    finally:
        driver.stop(timeout=30)
    states = {v.request_id: v.state for v in final.finished}
    assert states["abort-me"] is RequestState.ABORTED
    assert states["too-many-logprobs"] is RequestState.REJECTED
    assert sum(s is RequestState.FINISHED for s in states.values()) == 43

    trace = load_trace(trace_path)
    assert trace.warning is None
    assert trace.info == final.info and trace.header["model"] == "demo"
    assert_same_run(driver.history(), trace.snapshots)
    assert {(e.kind, e.request_id) for e in trace.events if e.kind != "add"} == {
        ("abort", "abort-me"),
        ("reject", "too-many-logprobs"),
    }
    results = results_path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in results] == [
        request_record(v) for v in driver.latest().finished
    ]


def test_recorded_header_holds_the_engine_flags_and_none_of_stepviews(
    engines: EnginePool, tmp_path: Path
) -> None:
    """stepview's own flags are parsed apart from vLLM's, so none of them (not even at its
    default value) reaches the trace header's ``engine_args``; the engine flags given do."""
    parsed = parse_engine_args(["--max-num-seqs", "8", "--max-model-len", "256"])
    engine = _Borrowed(engines.get())
    trace_path = tmp_path / "header.trace.jsonl"
    recorder = TraceRecorder(trace_path, EngineArgsHolder(parsed).header_fields)
    driver = Driver(lambda phase: engine, sinks=[recorder])
    driver.start()
    try:
        driver.send(AddRequest("one", "hello", SamplingSpec(max_tokens=2)))
        wait_for(driver, lambda s: len(s.finished) == 1 and all_done(s), timeout=60)
    finally:
        driver.stop(timeout=30)
    header = load_trace(trace_path).header
    engine_args = header["engine_args"]
    assert (engine_args["max_num_seqs"], engine_args["max_model_len"]) == (8, 256)
    assert header["demo_model"] is True and "model" in engine_args
    # --otlp-traces-endpoint is vLLM's own flag too: stepview hands it on to the engine.
    shared = {"otlp_traces_endpoint"}
    own = {action.dest for action in stepview_parser()._actions} - shared
    assert own.isdisjoint(engine_args), sorted(own & engine_args.keys())
