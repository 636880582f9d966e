"""The OTLP output on real vLLM, into a real OTLP/gRPC receiver beside vLLM's own spans.

* ``--attach``: vLLM's API server with stepview's plug-in and vLLM's own
  ``--otlp-traces-endpoint``, both at one receiver; a client sends requests with W3C
  ``traceparent`` headers, more than the two running slots take at once (so some wait for
  max_num_seqs); ``stepview --attach … --headless --otlp-traces-endpoint …`` watches. Each
  request is then one trace: the client's, holding vLLM's ``llm_request`` and stepview's
  request span (both children of the client's span) and stepview's phase spans.
* stepview's own engine, in both core modes: vLLM's ``llm_request`` sits inside stepview's
  request span (stepview made the context and handed it to vLLM).

The queue: stepview's waiting spans run from the request's arrival (vLLM's ``arrival_time``,
when the API server took it) to vLLM's own scheduling instant (the plug-in's
``scheduled_at``); vLLM's ``gen_ai.latency.time_in_queue`` runs from when the engine core
queued it to that same instant. The two differ by the front end's work before the core
queues a request (tokenizing it, the hop to the engine-core process) and by where the watch
places the run's clock on the wall clock (under a millisecond): a few milliseconds here, so
the tolerance is QUEUE_TOLERANCE_S, generous for a busy 2-core machine yet far below the
hundreds of milliseconds the waiting requests queue.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from stepview.insight.trace_context import SpanContext, format_traceparent
from stepview.testing.otlp_receiver import OtlpReceiver, ReceivedSpan
from stepview.testing.vllm_server import (
    MODEL_NAME,
    ApiServer,
    free_port,
    server_command,
    server_env,
)
from tests.engine.watch.attach_helpers import watching
from tests.otlp.spans_check import by_request, check_tiling, queued

pytestmark = pytest.mark.engine

QUEUE_TOLERANCE_S = 0.15  # 79 ms seen beside two busy loops (the front end, before the core)
REQUESTS = 6


def _complete(port: int, traceparent: str) -> None:
    body = {"model": MODEL_NAME, "prompt": "The tide came in " * 8, "max_tokens": 24,
            "temperature": 0, "ignore_eos": True}  # fmt: skip
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "traceparent": traceparent},
    )
    with urllib.request.urlopen(request, timeout=300) as answer:
        json.load(answer)


def _vllm_spans(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == "llm_request"]


# Heavy (tests/scheduling.py): its API server's start keeps both cores busy, and its queue
# spans are held to vLLM's own within QUEUE_TOLERANCE_S, which a starved front end stretches.
# The own engine's tests below run headless, nothing timed: with the other modules of vLLM.
@pytest.mark.heavy
def test_attached_requests_join_the_clients_trace_beside_vllms_span(
    demo_model_path: Path, tmp_path: Path
) -> None:
    receiver = OtlpReceiver()
    port, publish = free_port(), f"tcp://127.0.0.1:{free_port()}"
    command = [
        *server_command(demo_model_path, port),
        *("--otlp-traces-endpoint", receiver.endpoint, "--max-num-seqs", "2"),
    ]
    server = ApiServer(command, server_env(publish), port, tmp_path / "server.log")
    server.start()
    watch_cmd = [
        sys.executable, "-m", "stepview", "--attach", publish, "--headless", "--json",
        "--log-file", str(tmp_path / "stepview.log"),
        "--otlp-traces-endpoint", receiver.endpoint,
    ]  # fmt: skip
    try:
        with watching(watch_cmd) as watch:
            watch.err.wait_for("stepview: watching", timeout=120)
            _complete(port, format_traceparent(SpanContext(1, 1)))  # the watch sees records
            watch.out.wait_for('"state": "finished"', timeout=120)
            clients = [SpanContext(0xC0FFEE00 + i, 0xBEEF00 + i) for i in range(REQUESTS)]
            threads = [
                threading.Thread(target=_complete, args=(port, format_traceparent(c)))
                for c in clients
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(300)
            finished = 0

            def one_more(line: str) -> bool:
                nonlocal finished
                finished += '"state": "finished"' in line
                return finished == REQUESTS

            watch.out.wait_until(one_more, 120, "not every request printed", since=1)
            wanted = {f"{c.trace_id:032x}" for c in clients}

            def all_in(spans: list[ReceivedSpan]) -> bool:
                # vLLM's own span of each (its exporter sends every 5 s).
                return wanted <= {s.trace_id for s in _vllm_spans(spans)}

            receiver.wait_for(all_in, timeout=120)
            watch.child.send_signal(signal.SIGINT)
            assert watch.child.wait(60) == 0
            err = watch.err.rest()
        assert any("request(s) sent as spans to" in line for line in err), err
        spans = receiver.spans
        ours = {r.trace_id: (r, p) for r, p in by_request(spans).values()}
        waited = []
        for context in clients:
            trace_id, client_span = f"{context.trace_id:032x}", f"{context.span_id:016x}"
            assert trace_id in ours, f"no stepview span in the client's trace {trace_id}"
            request, phases = ours[trace_id]
            vllm = [s for s in _vllm_spans(spans) if s.trace_id == trace_id]
            assert len(vllm) == 1  # one trace: the client's, vLLM's span and stepview's
            assert vllm[0].parent_id == client_span and request.parent_id == client_span
            check_tiling(request, phases)
            assert request.attributes["gen_ai.usage.output_tokens"] == 24
            ours_queue = queued(phases)
            theirs = vllm[0].attributes["gen_ai.latency.time_in_queue"]
            assert abs(ours_queue - theirs) <= QUEUE_TOLERANCE_S, (ours_queue, theirs)
            waited += [p for p in phases if p.attributes.get("stepview.wait.reason")]
        # Six requests for two running slots: some waited, and stepview says for what.
        reasons = {p.attributes["stepview.wait.reason"] for p in waited}
        assert "max_num_seqs" in reasons, reasons
        named = next(p for p in waited if p.attributes["stepview.wait.reason"] == "max_num_seqs")
        assert "running slots taken" in named.attributes["stepview.wait.text"]
    finally:
        server.kill()
        receiver.stop()


@pytest.mark.parametrize("multiprocess", ["0", "1"], ids=["in-process", "core-process"])
def test_own_engine_puts_vllms_span_inside_its_request_span(
    multiprocess: str, tmp_path: Path
) -> None:
    receiver = OtlpReceiver()
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": multiprocess, "HF_HUB_OFFLINE": "1"}
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "stepview",
                "--headless",
                "--model",
                "demo-tiny",
                "--max-num-seqs",
                "1",
                "--log-file",
                str(tmp_path / "stepview.log"),
                "--otlp-traces-endpoint",
                receiver.endpoint,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "3 request(s) sent as spans to" in done.stderr
        spans = receiver.wait_for(lambda got: len(by_request(got)) == 3, timeout=60)
        samples = sum(r.attributes["gen_ai.request.n"] for r, _ in by_request(spans).values())
        spans = receiver.wait_for(lambda got: len(_vllm_spans(got)) >= samples, timeout=60)
        requests = by_request(spans)
        assert len(requests) == 3
        for request, phases in requests.values():
            assert request.parent_id is None  # the root: stepview started the trace
            check_tiling(request, phases)
            inside = [s for s in _vllm_spans(spans) if s.parent_id == request.span_id]
            samples = request.attributes["gen_ai.request.n"]  # vLLM: a span per sample
            assert len(inside) == samples and {s.trace_id for s in inside} == {request.trace_id}
        # One running slot, three prompts: two of them waited for it.
        assert any(
            p.attributes.get("stepview.wait.reason") == "max_num_seqs"
            for _, phases in requests.values()
            for p in phases
        )
    finally:
        receiver.stop()
