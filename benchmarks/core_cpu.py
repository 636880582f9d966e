"""What stepview costs the engine core in its own process, in the core's own CPU time.

Wall-time ratios on a shared 2-core machine move by 10-25 % from run to run, more than the
effect measured; the engine-core process's CPU clock does not (a neighbour delays it, but
does not add to it). With the core in its own process (``VLLM_ENABLE_V1_MULTIPROCESSING=1``),
the only thing stepview adds there is its scheduler plug-in (capture and publish of each
step's records) and the reading of its commands; everything else (snapshots, insight, the
UI) runs in stepview's own process. So this benchmark runs, in interleaved pairs on the same
seeded workload as ``engine_overhead.py``:

* ``bare``: vLLM's ``llm_engine_example`` loop, core in its own process;
* ``driver@mp``: stepview's driver on the same engine, core in its own process, plug-in
  capturing every step;

and in each child takes the CPU time (user + system) of the engine's processes (the engine
core and its workers: every descendant of the child) from when the engine is ready and idle
to when the last request has finished. The last line is
``core cpu: driver@mp/bare=X (median of N pairs)``, the median of the per-pair ratios.

Run it alone on the machine (``flock /tmp/stepview-engine.lock ...``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.children import child_env, module_command
from benchmarks.workload import BENCH_ENV, CHILD_TIMEOUT_S, POLL_S, workload, write_workload

VARIANTS = ("bare", "driver@mp")


def engine_cpu() -> Callable[[], float]:
    """A reading of the CPU seconds (user + system) this process's descendants have used:
    the engine core and its workers, found anew each time."""
    import psutil  # a vLLM dependency

    me = psutil.Process()

    def read() -> float:
        total = 0.0
        for child in me.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                times = child.cpu_times()
                total += times.user + times.system
        return total

    return read


def _child_bare(workload_path: Path, workdir: Path) -> dict[str, float]:
    from stepview.engine.own.engine_args import parse_engine_args
    from stepview.engine.own.environment import prepare_vllm_environment
    from stepview.files.prompts_file import read_prompts

    prepare_vllm_environment(workdir / "bare.log")
    from vllm import LLMEngine, SamplingParams

    engine = LLMEngine.from_engine_args(parse_engine_args([]).engine_args)
    cpu = engine_cpu()
    before, steps = cpu(), 0
    for request in read_prompts(workload_path):
        engine.add_request(
            request.request_id, request.prompt, SamplingParams(**request.spec.to_dict())
        )
    while engine.has_unfinished_requests():
        engine.step()
        steps += 1
    used = cpu() - before
    engine.engine_core.shutdown()
    return {"core_cpu_s": used, "steps": steps}


def _child_driver(workload_path: Path, workdir: Path) -> dict[str, float]:
    from stepview.engine.own.engine_args import EngineArgsHolder
    from stepview.engine.own.environment import prepare_vllm_environment
    from stepview.engine.own.processes import EngineProcesses
    from stepview.files.prompts_file import read_prompts
    from stepview.launch.compose import own_driver
    from stepview.model.snapshot import EngineState
    from stepview.run.spec import RunSpec

    log_path = workdir / "driver.log"
    prepare_vllm_environment(log_path)
    requests = read_prompts(workload_path)
    driver = own_driver(
        RunSpec(),
        log_path,
        holder=EngineArgsHolder(),
        processes=EngineProcesses(),
        sinks=(),
        history=None,
        admit_per_step=0,
        insight=None,
    )
    driver.start()
    _until(lambda: driver.latest().engine_state is EngineState.IDLE, driver)
    cpu = engine_cpu()
    before = cpu()
    for request in requests:
        driver.send(request)
    _until(lambda: len(driver.latest().finished) >= len(requests), driver)
    used = cpu() - before
    steps = driver.latest().step
    driver.stop(timeout=60.0)
    return {"core_cpu_s": used, "steps": steps}


def _until(condition: Callable[[], bool], driver: object) -> None:
    from stepview.model.snapshot import EngineState

    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while not condition():
        latest = driver.latest()  # type: ignore[attr-defined]
        if latest.engine_state is EngineState.ERROR:
            raise SystemExit(f"engine failed: {latest.phase}")
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        time.sleep(POLL_S)


def run_child(variant: str, workload_path: Path, workdir: Path) -> dict[str, float]:
    """One fresh process for ``variant``; what it measured."""
    env = child_env({**os.environ, **BENCH_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"})
    command = module_command(
        "benchmarks.core_cpu", "--child", variant, str(workload_path), str(workdir)
    )
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"{variant} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--pairs", type=int, default=5, help="interleaved pairs (default 5)")
    parser.add_argument("--requests", type=int, default=64, help="requests per run (default 64)")
    parser.add_argument("--max-tokens", type=int, default=64, help="max_tokens (default 64)")
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 pair of 8 x 8")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        variant, workload_path, workdir = args.child
        child = _child_bare if variant == "bare" else _child_driver
        print(json.dumps(child(Path(workload_path), Path(workdir))), flush=True)
        return 0
    if args.quick:
        args.pairs, args.requests, args.max_tokens = 1, 8, 8
    root = Path(tempfile.mkdtemp(prefix="stepview-core-cpu-"))
    workload_path = root / "workload.jsonl"
    write_workload(workload_path, workload(args.requests, args.max_tokens))
    print(
        f"core_cpu: {args.requests} requests x {args.max_tokens} tokens, {args.pairs} pair(s), "
        "engine core in its own process; CPU of the engine's processes, ready to done",
        flush=True,
    )
    ratios: list[float] = []
    try:
        for pair in range(args.pairs):
            order = VARIANTS if pair % 2 == 0 else VARIANTS[::-1]  # ABBA: neither always first
            got = {}
            for variant in order:
                workdir = root / f"p{pair}-{variant.replace('@', '-')}"
                workdir.mkdir()
                got[variant] = run_child(variant, workload_path, workdir)
                per_step = got[variant]["core_cpu_s"] / max(1, got[variant]["steps"]) * 1e3
                print(
                    f"  pair {pair + 1} {variant:<10} core CPU {got[variant]['core_cpu_s']:.3f} s"
                    f" over {got[variant]['steps']:.0f} steps ({per_step:.2f} ms/step)",
                    flush=True,
                )
            ratios.append(got["driver@mp"]["core_cpu_s"] / got["bare"]["core_cpu_s"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"per-pair ratios: {', '.join(f'{r:.3f}' for r in ratios)}")
    print(
        f"core cpu: driver@mp/bare={statistics.median(ratios):.3f} (median of {len(ratios)} pairs)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
