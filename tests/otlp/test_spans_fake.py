"""The OTLP output on the fake engine, into a real OTLP/gRPC receiver: the spans' shape.

The driver runs the fake engine with one running slot, so requests wait for max_num_seqs;
the sink builds each finished request's spans and the SDK's batch processor sends them. The
receiver then holds one trace per request: the request span (GenAI names, vLLM's latency
names) and its phases, tiling it; the waiting spans' length is the request's time in queue.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stepview.cli import main
from stepview.engine.driver.loop import Driver
from stepview.insight.run import RunInsight
from stepview.insight.trace_context import own_context, parse_traceparent, request_ids
from stepview.model.commands import AddRequest
from stepview.model.epoch import RunEpoch
from stepview.model.sampling import SamplingSpec
from stepview.model.sink import SnapshotSink
from stepview.otlp.exporter import SpanExport
from stepview.otlp.sink import SpanSink
from stepview.outputs.spans import open_outlet, spans_note
from stepview.testing.fake_engine import FakeEngine, ManualClock
from stepview.testing.otlp_receiver import OtlpReceiver
from stepview.trace.recorder import TraceRecorder
from tests.helpers import all_done, wait_for
from tests.otlp.spans_check import by_request, check_tiling, queued

IDS = ("a", "b", "c")


def _run(endpoint: str, trace: Path | None = None) -> tuple[SpanSink, SpanExport]:
    export = SpanExport(endpoint)
    insight = RunInsight()
    epoch = RunEpoch()
    sink = SpanSink(export, insight, epoch)
    sinks: list[SnapshotSink] = [epoch, sink]
    if trace is not None:
        sinks.append(TraceRecorder(trace, {"model": "fake-engine", "epoch": 1.0e9}))
    driver = Driver(
        lambda phase: FakeEngine(max_num_seqs=1),
        clock=ManualClock(tick=0.001),
        sinks=sinks,
        insight=insight,
    )
    driver.start()
    try:
        for rid in IDS:
            driver.send(AddRequest(rid, "a prompt of some words " * 4, SamplingSpec(max_tokens=6)))
        wait_for(driver, lambda s: len(s.finished) == len(IDS) and all_done(s))
    finally:
        driver.stop()  # closes the sinks: the export sends what it holds
    return sink, export


def test_each_request_is_one_trace_of_its_phases(receiver: OtlpReceiver) -> None:
    sink, export = _run(receiver.endpoint)
    assert sink.requests == 3 and export.dropped == 0
    requests = by_request(receiver.spans)
    assert sorted(requests) == list(IDS)
    assert len({span.trace_id for span, _ in requests.values()}) == 3  # a trace each
    waited_for = set()
    for request, phases in requests.values():
        assert request.name == "text_completion fake-engine"
        assert request.parent_id is None  # no client context: the root of its own trace
        assert request.attributes["gen_ai.operation.name"] == "text_completion"
        assert request.attributes["gen_ai.usage.output_tokens"] == 6
        assert request.attributes["gen_ai.response.finish_reasons"] == ["length"]
        assert request.attributes["stepview.request.outcome"] == "finished"
        assert request.resource["service.name"] == "stepview"
        check_tiling(request, phases)
        kinds = [p.attributes["stepview.phase"] for p in phases]
        assert "prefill" in kinds and kinds[-1] == "decode"
        prefill = next(p for p in phases if p.attributes["stepview.phase"] == "prefill")
        assert [e[0] for e in prefill.events] == ["prefill chunk"] * len(prefill.events)
        assert (
            prefill.events
            and sum(e[2]["stepview.prefill.chunk_tokens"] for e in prefill.events)
            == prefill.attributes["stepview.prefill.tokens"]
        )
        # The queue spans are the time in queue vLLM's name gives (same timings: exact).
        assert queued(phases) == pytest.approx(
            request.attributes["gen_ai.latency.time_in_queue"], abs=2e-6
        )
        waited_for |= {p.attributes.get("stepview.wait.reason") for p in phases}
    # One running slot: the later requests waited for it, and the span says so in words.
    assert "max_num_seqs" in waited_for
    waiting = next(
        p
        for _, phases in requests.values()
        for p in phases
        if p.attributes.get("stepview.wait.reason") == "max_num_seqs"
    )
    assert waiting.name == "waiting: max_num_seqs"
    assert "running slot" in waiting.attributes["stepview.wait.text"]
    assert waiting.attributes["stepview.wait.steps"] >= 1


def test_a_receiver_that_is_down_costs_the_run_nothing_but_the_spans(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nobody listens: the run ends whole, in bounded time, every span counted as dropped,
    said once."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2")
    gone = OtlpReceiver()
    endpoint = gone.endpoint
    gone.stop()
    said: list[str] = []
    export = SpanExport(endpoint)
    export.on_drop = lambda: said.append("dropped")
    insight = RunInsight()
    epoch = RunEpoch()
    sink = SpanSink(export, insight, epoch)
    driver = Driver(
        lambda phase: FakeEngine(max_num_seqs=1),
        clock=ManualClock(tick=0.001),
        sinks=[epoch, sink],
        insight=insight,
    )
    driver.start()
    for rid in IDS:
        driver.send(AddRequest(rid, "hello", SamplingSpec(max_tokens=3)))
    wait_for(driver, lambda s: len(s.finished) == 3 and all_done(s))
    driver.stop()
    assert sink.requests == 3
    assert export.sent == 0 or export.dropped == export.sent
    assert export.dropped >= 3 * 3  # a request span and at least two phases each
    assert said == ["dropped"]
    line = spans_note(sink, endpoint)  # the run's last line: nothing said to have arrived
    assert line.startswith(f"none of 3 request(s) reached {endpoint} as spans; "), line


def test_a_recording_sent_offline_is_the_same_spans(
    receiver: OtlpReceiver, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--replay TRACE --otlp-traces-endpoint URL --headless``: sends, says how many, exits."""
    trace = tmp_path / "run.trace.jsonl"
    live = OtlpReceiver()
    try:
        _run(live.endpoint, trace)
        live_ids = {(s.trace_id, s.span_id, s.name) for s in live.spans}
    finally:
        live.stop()
    code = main(["--replay", str(trace), "--otlp-traces-endpoint", receiver.endpoint, "--headless"])
    assert code == 0
    assert f"3 request(s) sent as spans to {receiver.endpoint}" in capsys.readouterr().err
    spans = receiver.wait_for(lambda got: len(got) >= len(live_ids))
    assert len(by_request(spans)) == 3
    # The request spans and phases are the live run's (a backend stores them once).
    names = sorted(name for _, _, name in live_ids)
    assert sorted(s.name for s in spans) == names


def test_offline_without_headless_or_without_the_sdk_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "none.trace.jsonl"
    assert main(["--replay", str(trace), "--otlp-traces-endpoint", "http://x:4317"]) == 2
    assert "add --headless" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "stepview.otlp.exporter", None)  # the extra not installed
    missing = open_outlet("http://127.0.0.1:4317")
    assert isinstance(missing, str) and "pip install 'vllm-stepview[otlp]'" in missing


def test_trace_context_joins_a_client_and_marks_stepviews_own() -> None:
    client = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    ids = request_ids(client, "r1", fallback_trace=5)
    assert ids.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    assert ids.parent_id == 0xB7AD6B7169203331 and ids.span_id != ids.parent_id
    own = own_context("r1")
    mine = request_ids(own, "r1", fallback_trace=5)
    parsed = parse_traceparent(own)
    assert parsed is not None and mine.parent_id is None and mine.span_id == parsed.span_id
    alone = request_ids("", "r1", fallback_trace=5)
    assert (alone.trace_id, alone.parent_id) == (5, None)
    assert parse_traceparent("00-" + "0" * 32 + "-b7ad6b7169203331-01") is None
    assert parse_traceparent("garbage") is None
    assert not request_ids(client[:-2] + "00", "r1", 5).sampled
