"""One run of one variant of ``engine_overhead.py``: what it measures and how it is run.

The children (one vLLM engine per process: vLLM's bare loop, or stepview's driver with no UI)
print a :class:`Measurement` as their last line; the ``tui`` variants run the real stepview
in tmux and read the run stats it writes as it stops. ``engine_overhead.py`` runs the rounds
and reports.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.children import child_env, module_command
from benchmarks.fake_engine_runs import FIRST_FRAME_ENV
from benchmarks.overhead_measurement import Measurement, bare_loop
from benchmarks.tmux_pane import Tmux, count_lines, stepview_command, wait_for
from benchmarks.workload import CHILD_TIMEOUT_S, POLL_S
from stepview.engine.driver import run_stats
from stepview.engine.driver.loop import Driver
from stepview.files.prompts_file import read_prompts
from stepview.model.commands import AddRequest

MULTIPROCESSING_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"
FAKE_ENGINE_ENV = "STEPVIEW_BENCH_FAKE_ENGINE"
"""Set (``engine_overhead --smoke``): every variant runs on stepview's fake engine instead
of vLLM (:mod:`benchmarks.fake_engine_runs`)."""
# The loading view's title: the first frame stepview draws (before vLLM is even imported).
FIRST_FRAME_TEXT = "Starting the engine"
FIRST_FRAME_POLL_S = 0.01


def faked() -> bool:
    """Whether this run is ``--smoke``'s, on the fake engine."""
    return FAKE_ENGINE_ENV in os.environ


def mode_env(variant: str) -> dict[str, str | None]:
    """Where this variant's engine core runs: ``None`` leaves the choice to vLLM / stepview.

    ``bare`` runs with vLLM's default, multiprocess (set explicitly: the child uses stepview's
    environment set-up, whose default may differ); ``bare-inproc`` and ``…@inproc`` force the
    core into the process, ``…@mp`` into its own; plain ``driver``/``tui`` take stepview's
    default.
    """
    if variant == "bare-inproc" or variant.endswith("@inproc"):
        return {MULTIPROCESSING_ENV: "0"}
    if variant == "bare" or variant.endswith("@mp"):
        return {MULTIPROCESSING_ENV: "1"}
    return {MULTIPROCESSING_ENV: None}


def env_for(env: dict[str, str], variant: str) -> dict[str, str]:
    merged = dict(env)
    for name, value in mode_env(variant).items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return merged


# -- children: one engine each ---------------------------------------------------------------


def _child_bare(requests: list[AddRequest], workdir: Path, name: str) -> Measurement:
    """vLLM's llm_engine_example loop, all requests added up front, nothing else."""
    from stepview.engine.own.engine_args import parse_engine_args
    from stepview.engine.own.environment import prepare_vllm_environment

    prepare_vllm_environment(workdir / "bare.log")  # same logging set-up as stepview
    from vllm import LLMEngine, SamplingParams

    engine = LLMEngine.from_engine_args(parse_engine_args([]).engine_args)
    for request in requests:
        engine.add_request(
            request.request_id, request.prompt, SamplingParams(**request.spec.to_dict())
        )
    measurement = bare_loop(
        name,
        engine.has_unfinished_requests,
        engine.step,
        # never pooling here: every output has completions
        lambda outputs: ((o.request_id, c) for o in outputs for c in o.outputs),  # type: ignore[union-attr]
    )
    engine.engine_core.shutdown()
    return measurement


def _child_driver(requests: list[AddRequest], workdir: Path, name: str) -> Measurement:
    """The TUI's driver set-up (``live_driver``, default history) with no UI reading it."""
    from stepview.engine.own.engine_args import EngineArgsHolder
    from stepview.engine.own.environment import prepare_vllm_environment
    from stepview.engine.own.live import live_driver
    from stepview.files.results_file import ResultsWriter
    from stepview.model.sink import SnapshotSink
    from stepview.model.snapshot import EngineState
    from stepview.trace.recorder import TraceRecorder

    log_path = workdir / "driver.log"
    make: Callable[..., Driver]
    if faked():
        from benchmarks.fake_engine_runs import fake_live_driver
        from stepview.testing.fake_engine import FakeEngine

        vllm_cpu, make = time_step(FakeEngine), fake_live_driver
    else:
        prepare_vllm_environment(log_path)
        from vllm import LLMEngine

        vllm_cpu, make = time_step(LLMEngine), live_driver
    holder = EngineArgsHolder()
    sinks: list[SnapshotSink] = (
        [
            TraceRecorder(workdir / "trace.jsonl", holder.header_fields),
            ResultsWriter(workdir / "results.jsonl"),
        ]
        if name == "driver+record"
        else []
    )
    driver = make([], log_path, holder=holder, sinks=sinks)
    for request in requests:
        driver.send(request)  # queued before start, as the TUI does with --prompts
    driver.start()
    while True:
        snapshot = driver.latest()
        if snapshot.engine_state is EngineState.ERROR:
            raise SystemExit(f"engine failed: {snapshot.phase}")
        if len(snapshot.finished) >= len(requests):
            break
        time.sleep(POLL_S)
    driver.stop(timeout=60.0)
    stats = driver.run_stats
    tokens = sum(view.output_tokens for view in driver.latest().finished)
    return Measurement(
        name,
        stats.steps,
        stats.busy_span,
        tokens,
        stats.stepping_time,
        stats.busy_cpu,
        vllm_cpu_s=vllm_cpu[0],
    )


def time_step(engine_class: Any) -> list[float]:
    """Wrap ``engine_class.step`` (vLLM's ``LLMEngine``, or the fake engine) to add up its
    thread CPU time; returns the running total.

    The wrapper's own cost (two clock reads, ~1 us per step) lands on stepview's side.
    """
    total = [0.0]
    step = engine_class.step

    def timed_step(self: Any) -> Any:
        start = time.thread_time()
        try:
            return step(self)
        finally:
            total[0] += time.thread_time() - start

    engine_class.step = timed_step
    return total


def child_main(variant: str, workload_path: Path, workdir: Path) -> None:
    """Run one variant and print its :class:`Measurement` as the last line of stdout."""
    requests = read_prompts(workload_path)
    if variant.startswith("bare") and faked():
        from benchmarks import fake_engine_runs

        measurement = fake_engine_runs.bare(requests, variant)
    elif variant.startswith("bare"):
        measurement = _child_bare(requests, workdir, variant)
    else:
        measurement = _child_driver(requests, workdir, variant)
    print(json.dumps(asdict(measurement)), flush=True)


def run_child(variant: str, workload_path: Path, workdir: Path, env: dict[str, str]) -> Measurement:
    """One driver or bare variant in a fresh process (one vLLM engine per process)."""
    command = module_command(
        "benchmarks.engine_overhead",
        *("--child", variant, "--workload", str(workload_path), "--workdir", str(workdir)),
    )
    done = subprocess.run(
        command,
        env=child_env(env_for(env, variant)),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(
            f"{variant} run failed (exit {done.returncode}); stderr:\n{done.stderr[-3000:]}"
        )
    return Measurement(**json.loads(done.stdout.strip().splitlines()[-1]))


# -- the TUI in tmux -------------------------------------------------------------------------


def run_tui(
    workload_path: Path, count: int, workdir: Path, env: dict[str, str], name: str = "tui"
) -> Measurement:
    """The real ``stepview`` in tmux: launch, first frame, all results, ``q``, its run stats."""
    results, log_path, rc_path = workdir / "results.jsonl", workdir / "stepview.log", workdir / "rc"
    stats_path, seen_file = workdir / "run_stats.json", workdir / "first-frame-seen"
    program, tmux_env = stepview_command(), env_for(env, name)
    if FAKE_ENGINE_ENV in env:  # --smoke: the real stepview, the fake engine in vLLM's place
        program = module_command("benchmarks.fake_engine_runs")
        tmux_env = child_env({**tmux_env, FIRST_FRAME_ENV: str(seen_file)})
    argv = [
        *program,
        "--prompts",
        str(workload_path),
        "--results",
        str(results),
        "--log-file",
        str(log_path),
    ]
    # The exit code goes to a file: the pane (and its text) is gone once the command ends.
    # The run stats too: the driver writes them there as it stops.
    hand_over = f"{run_stats.RUN_STATS_ENV}={shlex.quote(str(stats_path))}"
    command = f"{hand_over} {shlex.join(argv)}; echo $? > {shlex.quote(str(rc_path))}"
    tmux = Tmux(f"stepview-bench-{os.getpid()}-{workdir.name}", tmux_env)
    launched = time.perf_counter()
    tmux.start(command)
    try:
        seen = wait_for(
            lambda: FIRST_FRAME_TEXT in tmux.screen() or not tmux.alive(),
            60.0,
            "the first frame",
            FIRST_FRAME_POLL_S,
        )
        first_frame = seen - launched
        seen_file.touch()  # where the fake engine's start-up waits for it (--smoke)
        wait_for(
            lambda: count_lines(results) >= count or not tmux.alive(),
            CHILD_TIMEOUT_S,
            "every result",
            POLL_S,
        )
        tmux.press("q")
        wait_for(lambda: not tmux.alive(), 60.0, "stepview to quit", POLL_S)
    finally:
        tmux.kill()
    code = rc_path.read_text().strip() if rc_path.exists() else "?"
    log_text = log_path.read_text(encoding="utf-8", errors="replace") if log_path.exists() else ""
    stats = run_stats.load(stats_path) if stats_path.exists() else None
    if code != "0" or stats is None or count_lines(results) < count:
        raise RuntimeError(f"stepview run failed (exit {code}); log tail:\n{log_text[-3000:]}")
    tokens = 0
    with results.open(encoding="utf-8") as handle:
        for line in handle:
            tokens += sum(len(c["token_ids"]) for c in json.loads(line)["completions"])
    return Measurement(
        name,
        stats.steps,
        stats.busy_span,
        tokens,
        stats.stepping_time,
        stats.busy_cpu,
        first_frame,
    )
