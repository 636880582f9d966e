"""What ``--otlp-traces-endpoint`` costs: µs per request on the driver thread, and throughput.

Stepview's own engine (the demo model, the engine core in the measuring process) runs the
seeded workload (:mod:`benchmarks.workload`) through the TUI's driver set-up with no UI, once
with the OTLP output on (the span sink and the SDK's batch processor, sending to a real
OTLP/gRPC receiver in the parent: :mod:`stepview.testing.otlp_receiver`) and once with it off,
each in a fresh process, in interleaved pairs (on/off, off/on, ...): runs of one variant
differ by up to 25 % here from round to round, pairs much less. Throughput is output tokens
per second of the driver's busy span; the figure is the median of the per-pair ratios
on/off (the goal: 0.99 or more); beside it, the ratio of the process's CPU time per output token
on/off. The per-request cost is the time the sink spends on the
driver thread per finished request (building its spans and handing them to the processor's
queue: :meth:`~stepview.otlp.sink.SpanSink.send`, timed with ``perf_counter_ns``); the
export itself runs on the processor's thread, which the throughput figure includes.

vLLM's own span export stays off in both (that is vLLM's cost, not stepview's). Last line:
``otlp_export: per_request_us=A on/off=B (median of N pairs)``.

Usage: ``python -m benchmarks otlp_export [--pairs 10] [--requests 128] [--max-tokens 32]``
(``--quick``: 2 pairs of 16 requests); run it alone (``flock /tmp/stepview-heavy.lock``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.children import child_env, module_command
from benchmarks.workload import BENCH_ENV, CHILD_TIMEOUT_S, POLL_S, workload, write_workload


def _child(on: bool, workload_path: Path, endpoint: str, workdir: Path) -> dict[str, float]:
    from stepview.engine.own.engine_args import EngineArgsHolder
    from stepview.engine.own.environment import prepare_vllm_environment
    from stepview.engine.own.processes import EngineProcesses
    from stepview.files.prompts_file import read_prompts
    from stepview.insight.run import RunInsight
    from stepview.launch.compose import own_driver
    from stepview.model.epoch import RunEpoch
    from stepview.model.sink import SnapshotSink
    from stepview.model.snapshot import EngineState
    from stepview.otlp.sink import SpanSink
    from stepview.run.spec import RunSpec

    log_path = workdir / "driver.log"
    prepare_vllm_environment(log_path)
    requests = read_prompts(workload_path)
    insight = RunInsight()
    sinks: list[SnapshotSink] = []
    spent = [0, 0]  # ns in SpanSink.send, requests sent
    if on:
        from stepview.otlp.exporter import SpanExport

        send = SpanSink.send

        def timed(self: SpanSink, views: Sequence[object], model: str) -> None:
            start = time.perf_counter_ns()
            send(self, views, model)  # type: ignore[arg-type]
            spent[0] += time.perf_counter_ns() - start
            spent[1] += len(views)

        SpanSink.send = timed  # type: ignore[method-assign]
        epoch = RunEpoch()
        sinks = [epoch, SpanSink(SpanExport(endpoint), insight, epoch)]
    driver = own_driver(
        RunSpec(),
        log_path,
        holder=EngineArgsHolder(),
        processes=EngineProcesses(),
        sinks=sinks,
        history=None,
        admit_per_step=0,
        insight=insight,
    )
    for request in requests:
        driver.send(request)
    cpu = time.process_time()
    driver.start()
    while len(driver.latest().finished) < len(requests):
        if driver.latest().engine_state is EngineState.ERROR:
            raise SystemExit(f"engine failed: {driver.latest().phase}")
        time.sleep(POLL_S)
    cpu = time.process_time() - cpu
    driver.stop(timeout=60.0)
    stats = driver.run_stats
    tokens = sum(view.output_tokens for view in driver.latest().finished)
    per_request = spent[0] / 1000 / spent[1] if spent[1] else 0.0
    return {
        "tokens_per_s": tokens / stats.busy_span,
        "per_request_us": per_request,
        "cpu_us_per_token": cpu * 1e6 / tokens,
    }


def _run(on: bool, workload_path: Path, endpoint: str, workdir: Path) -> dict[str, float]:
    command = module_command(
        "benchmarks.otlp_export",
        *("--child", "on" if on else "off", "--workload", str(workload_path)),
        *("--endpoint", endpoint, "--workdir", str(workdir)),
    )
    done = subprocess.run(
        command,
        env=child_env({**BENCH_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", choices=("on", "off"))
    parser.add_argument("--workload", type=Path)
    parser.add_argument("--endpoint", default="")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(_child(args.child == "on", args.workload, args.endpoint, args.workdir)))
        return 0
    pairs, count = (2, 16) if args.quick else (args.pairs, args.requests)
    from stepview.testing.otlp_receiver import OtlpReceiver

    receiver = OtlpReceiver()
    ratios, costs, cpu_ratios = [], [], []
    try:
        with tempfile.TemporaryDirectory() as folder:
            workdir = Path(folder)
            path = workdir / "workload.jsonl"
            write_workload(path, workload(count, args.max_tokens))
            for pair in range(pairs):
                order = (True, False) if pair % 2 == 0 else (False, True)
                runs = {on: _run(on, path, receiver.endpoint, workdir) for on in order}
                ratios.append(runs[True]["tokens_per_s"] / runs[False]["tokens_per_s"])
                costs.append(runs[True]["per_request_us"])
                cpu_ratios.append(runs[True]["cpu_us_per_token"] / runs[False]["cpu_us_per_token"])
                print(
                    f"pair {pair + 1}: on {runs[True]['tokens_per_s']:.0f} tok/s, "
                    f"off {runs[False]['tokens_per_s']:.0f} tok/s, "
                    f"{runs[True]['per_request_us']:.0f} us per request, "
                    f"CPU per token on/off {cpu_ratios[-1]:.3f}",
                    flush=True,
                )
    finally:
        receiver.stop()
    print(f"spans received: {len(receiver.spans)}")
    # The process's CPU per output token (every thread: the engine core's, the driver's, the
    # SDK's exporter's) is steadier than the wall clock on a shared 2-core machine: what the
    # export adds to the work, where tok/s also carries the machine's noise.
    print(f"CPU per output token, on/off: {statistics.median(cpu_ratios):.3f} (median)")
    print(
        f"otlp_export: per_request_us={statistics.median(costs):.0f} "
        f"on/off={statistics.median(ratios):.3f} (median of {pairs} pairs)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
