"""The OTLP output as one entry of the registry (:mod:`stepview.outputs.spans`), through the
command line and the opening every mode shares: its refusals, the run's epoch, the metrics
page's count of its drops, and the endpoint handed on to stepview's own vLLM."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from stepview.cli import main
from stepview.cli.args import parse_own_args
from stepview.cli.specs import run_spec
from stepview.engine.records.facts import EndedFacts
from stepview.engine.watch.fleet.fleet_pool import FleetPool, PooledSource
from stepview.engine.watch.link.backlog import FleetPaces
from stepview.insight.run import RunInsight
from stepview.launch.fleet import _source
from stepview.launch.outputs import RunOutputs, open_outputs
from stepview.metrics.exporter import MetricsExporter
from stepview.model.epoch import RunEpoch
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.otlp.exporter import SpanExport
from stepview.otlp.sink import SERVER, SpanSink
from stepview.outputs.spans import SentSpans
from stepview.outputs.watching import ServedMetrics
from stepview.testing.otlp_receiver import OtlpReceiver
from tests.engine.watch.attach_helpers import Server, ipc_address, record, request
from tests.otlp.spans_check import by_request

URL = "http://127.0.0.1:4317"


def _opened(args: list[str], header: dict[str, object] | None = None) -> RunOutputs:
    own, engine_argv = parse_own_args(args)
    outputs = open_outputs(
        run_spec(own, engine_argv), lambda: header or {}, RunInsight(), default_results=False
    )
    assert isinstance(outputs, RunOutputs)
    return outputs


@pytest.mark.parametrize(
    "beside",
    [["--summary"], ["--compare", "other.trace.jsonl"], ["--export-csv", "out.csv"]],
)
def test_sent_from_a_trace_it_goes_alone(
    beside: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = str(tmp_path / "run.trace.jsonl")
    args = ["--replay", trace, "--otlp-traces-endpoint", URL, "--headless", *beside]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        "stepview: --otlp-traces-endpoint with --replay: no --summary, --compare or exports "
        "beside it\n"
    )


def test_a_metrics_page_without_the_plugins_requests_refuses_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A ``/metrics`` page has no requests to send."""
    assert main(["--attach", "http://127.0.0.1:8000", "--otlp-traces-endpoint", URL]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stepview: --otlp-traces-endpoint: not with "), err
    assert err.count("\n") == 1


def test_a_fleets_plugin_servers_send_their_requests_through_one_export(
    tmp_path: Path,
    receiver: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two simulated plug-in servers, watched as ``run_fleet`` watches them (its pool, each
    server's driver built by ``launch.fleet``): each request's spans reach the receiver with
    its server's address on every span, and the one export is closed once, at the end."""
    servers = {rid: Server(ipc_address(tmp_path, f"{rid}.sock")) for rid in ("a", "b")}
    attach = [word for server in servers.values() for word in ("--attach", server.address)]
    own, argv = parse_own_args([*attach, "--otlp-traces-endpoint", receiver.endpoint, "-H"])
    spec = run_spec(own, argv)
    outputs = open_outputs(spec, dict, RunInsight(), default_results=False)
    assert isinstance(outputs, RunOutputs)
    spans = outputs.opened["spans"]
    assert isinstance(spans, SentSpans)
    export = spans.sink.outlet
    closed: list[float] = []
    close = export.close

    def counted(timeout_s: float = 5.0) -> None:
        closed.append(timeout_s)
        close(timeout_s)

    monkeypatch.setattr(export, "close", counted)
    pool, turn = FleetPool(), threading.RLock()
    pool.start()
    members = [
        PooledSource(_source(spec, server, None, FleetPaces(), turn, pool, outputs), pool)
        for server in spec.watch.servers
    ]
    try:
        for member in members:
            member.start()
        for rid, server in servers.items():
            core_id = f"{rid}-0123abcd"
            server.wait_subscribed()
            server.send(
                record(1, request(core_id, outputs=1, new=[7])),
                record(2, finished=[core_id], ended=[EndedFacts(core_id, 2, [7, 8], "stop")]),
            )
        got = receiver.wait_for(lambda received: sorted(by_request(received)) == ["a", "b"])
        assert closed == []  # no driver closes what the fleet's drivers share
    finally:
        pool.halt_all()
        for member in members:
            member.stop()
        pool.stop()
        outputs.close()
        for server in servers.values():
            server.kill()
    assert len(closed) == 1
    for rid, (request_span, phases) in by_request(got).items():
        address = servers[rid].address
        for span in (request_span, *phases):
            assert span.attributes[SERVER] == address, span
            assert span.attributes["server.address"] == address.removeprefix("ipc://")
    outputs.report_files()
    assert f"2 request(s) sent as spans to {receiver.endpoint}\n" in capsys.readouterr().err


def test_stepviews_own_vllm_is_given_the_endpoint_a_watched_server_is_not() -> None:
    own, argv = parse_own_args(["--otlp-traces-endpoint", URL, "--max-num-seqs", "2"])
    assert run_spec(own, argv).engine.argv == ("--max-num-seqs", "2", "--otlp-traces-endpoint", URL)
    own, argv = parse_own_args(["--attach", "tcp://127.0.0.1:5555", "--otlp-traces-endpoint", URL])
    assert run_spec(own, argv).engine.argv == ()
    own, argv = parse_own_args(["--max-num-seqs", "2"])
    assert run_spec(own, argv).engine.argv == ("--max-num-seqs", "2")


def test_the_epoch_is_noted_first_and_kept_in_recordings_only_when_an_output_needs_it(
    tmp_path: Path,
) -> None:
    plain = _opened(["--results", str(tmp_path / "r.jsonl")])
    assert not any(isinstance(sink, RunEpoch) for sink in plain.sinks)
    plain.close()
    for sink in plain.sinks:
        sink.close()

    record = tmp_path / "run.trace.jsonl"
    outputs = _opened(["--record", str(record)], {"model": "m"})
    epoch = outputs.sinks[0]
    assert isinstance(epoch, RunEpoch)
    snapshot = StepSnapshot(step=1, clock=2.5, engine_state=EngineState.RUNNING)
    for sink in outputs.sinks:
        sink.on_snapshot(snapshot, [])
    for sink in outputs.sinks:
        sink.close()
    assert epoch.epoch is not None
    header = json.loads(record.read_text().splitlines()[0])
    assert header["model"] == "m" and header["epoch"] == round(epoch.epoch, 6)


def test_the_metrics_page_counts_the_spans_it_drops(capsys: pytest.CaptureFixture[str]) -> None:
    outputs = _opened(["--otlp-traces-endpoint", URL, "--metrics-port", "0", "--headless"])
    spans, metrics = outputs.opened["spans"], outputs.opened["metrics"]
    assert isinstance(spans, SentSpans) and isinstance(metrics, ServedMetrics)
    # The epoch first, then the outputs in registry order: the spans before the page.
    assert [type(sink) for sink in outputs.sinks] == [RunEpoch, SpanSink, MetricsExporter]
    outlet = spans.sink.outlet
    assert isinstance(outlet, SpanExport) and metrics.exporter.spans_dropped() == 0
    outlet.full = 3  # as a full queue counts them
    assert metrics.exporter.spans_dropped() == 3
    outputs.report_files()
    outputs.discard()
    err = capsys.readouterr().err
    assert f"stepview: sending each request as spans to {URL}\n" in err
    assert f"stepview: none of 0 request(s) reached {URL} as spans; 3 span(s) dropped" in err
