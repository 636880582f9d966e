"""What watching the engine costs: bare vLLM, stepview's driver, recording, and the full TUI.

One command measures, side by side and on the same workload, the throughput of

* ``bare``: vLLM's ``llm_engine_example`` loop (``add_request`` every prompt, then ``step()``
  until nothing is unfinished) on the engine flags stepview's demo defaults give, with vLLM's
  default engine settings: the engine core (scheduler and model) in its own process. This is
  what a user compares stepview with. ``bare-inproc`` is the same loop with the engine core in
  the calling process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), printed for reference;
* ``driver``: the same engine behind :class:`~stepview.engine.own.vllm_engine.VllmEngine` and
  :class:`~stepview.engine.driver.loop.Driver`, building and publishing a snapshot after every step,
  with no UI;
* ``driver+record``: the same with a :class:`~stepview.trace.recorder.TraceRecorder` and a
  :class:`~stepview.files.results_file.ResultsWriter` as sinks (what ``--record`` adds);
* ``tui``: the real ``stepview --prompts W --results R --log-file L`` in a 120x40 tmux pane;
  the benchmark waits for the results file to hold every request, presses ``q``, and reads the
  driver's :class:`~stepview.engine.driver.run_stats.RunStats`, which stepview writes as JSON to the
  file named by ``STEPVIEW_RUN_STATS`` as it stops.

``driver``, ``driver+record`` and ``tui`` run in stepview's default engine-core mode;
``--modes mp,inproc`` adds ``driver@mp``, ``tui@mp``, ``driver@inproc`` and ``tui@inproc``, the
side-by-side figures that choose that default (whichever costs the engine less with the TUI
running).

Every variant is counted the same way: steps and output tokens (every sample of an ``n=2``
request) over the engine-busy span, from the start of the first ``step()`` to the end of the
last one. Engine start-up (seconds, and the same code for all) and the time the TUI sits idle
before ``q`` are left out; they would swamp a ~2 s busy span with noise unrelated to watching.

Only one vLLM engine may live in a process, and a process that has run one is not a clean
slate, so every measurement is a fresh subprocess; the variants take turns (the order rotates
each round) so that a slow patch of the machine hits all of them, and each figure is the
median over rounds. The parent process never imports vLLM.

``--smoke`` runs ``--quick``'s size on stepview's fake engine instead of vLLM
(:mod:`benchmarks.fake_engine_runs`): every variant's plumbing and every line of the report in
seconds, the figures meaningless; the smoke test runs it.

Run it under the engine lock on a shared machine (``flock /tmp/stepview-engine.lock ...``): with
2 cores, anything else running slows whichever variant it overlaps. Even so, single runs of the
same variant differ by up to ~10 % here; trust medians over several rounds, not one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.overhead_measurement import Measurement
from benchmarks.overhead_runs import (
    FAKE_ENGINE_ENV,
    MULTIPROCESSING_ENV,
    child_main,
    mode_env,
    run_child,
    run_tui,
)
from benchmarks.workload import BENCH_ENV, workload, write_workload
from stepview.engine.own.environment import DEFAULT_MULTIPROCESSING

BASE_VARIANTS = ("bare", "bare-inproc", "driver", "driver+record", "tui")
MODES = ("mp", "inproc")


def variants(modes: Sequence[str]) -> tuple[str, ...]:
    """The variants of one round: the base ones, plus driver and tui in each mode asked for."""
    extra = tuple(f"{kind}@{mode}" for mode in modes for kind in ("driver", "tui"))
    return BASE_VARIANTS + extra


# -- the parent: rounds, figures -------------------------------------------------------------


def _stats(values: Sequence[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def _mode_of(variant: str) -> str:
    """``mp`` or ``inproc``: where the variant's engine core ran."""
    forced = mode_env(variant)[MULTIPROCESSING_ENV]
    if forced is None:
        forced = DEFAULT_MULTIPROCESSING
    return "inproc" if forced == "0" else "mp"


def report(runs: dict[str, list[Measurement]], out: Callable[[str], None]) -> None:
    """Per-variant figures, consistency notes, and the ``ratios:`` line last."""
    steps_head, tokens_head = "steps/s  median     min     max", "tok/s  median     min     max"
    out(f"{'variant':<14} {steps_head:>31}   {tokens_head:>29}   in step()  CPU ms/step")
    for variant, got in runs.items():
        if not got:
            continue
        steps = _stats([m.steps_per_s for m in got])
        tokens = _stats([m.tokens_per_s for m in got])
        share = statistics.median(m.stepping_s / m.busy_s for m in got)
        cpu = statistics.median(m.cpu_s / m.steps for m in got) * 1000
        out(
            f"{variant:<14} {steps[0]:>15.1f} {steps[1]:>7.1f} {steps[2]:>7.1f}   "
            f"{tokens[0]:>13.0f} {tokens[1]:>7.0f} {tokens[2]:>7.0f}   {share:>8.1%}"
            f"  {cpu:>11.2f}"
        )
    frames = [m.first_frame_s for m in runs.get("tui", []) if m.first_frame_s is not None]
    if frames:
        median, low, high = _stats(frames)
        out(
            f"first frame (tui, launch to loading view): median {median:.3f} s, "
            f"min {low:.3f}, max {high:.3f}"
        )
    # Fixed seeds: every variant must do exactly the same work, or the comparison is void.
    # With the engine core in its own process, ``step()`` is called once more at the end (the
    # last outputs arrive after the core's last step), so steps are compared within a mode.
    work = {(_mode_of(v), m.steps, m.output_tokens) for v, ms in runs.items() for m in ms}
    per_mode = {mode for mode, _, _ in work}
    if len(work) > len(per_mode) or len({tokens for _, _, tokens in work}) > 1:
        out(f"WARNING: variants did different work (mode, steps, output tokens): {sorted(work)}")
    else:
        steps_text = ", ".join(f"{steps} steps ({mode})" for mode, steps, _ in sorted(work))
        n_tokens = work.pop()[2]
        out(f"work per run: {steps_text}, {n_tokens} output tokens (identical in every run)")
    medians = {v: statistics.median(m.tokens_per_s for m in ms) for v, ms in runs.items() if ms}
    bare = medians["bare"]
    out(
        f"engine core: stepview's default is {_mode_of('driver')}; "
        f"bare-inproc/bare={medians['bare-inproc'] / bare:.2f}"
        + "".join(f" {v}/bare={medians[v] / bare:.2f}" for v in medians if "@" in v)
    )
    # Engine-thread CPU per step does not grow when other processes take the CPU, so it shows
    # the driver's own cost on a busy machine; it misses the GIL waits a UI thread causes.
    # Only comparable within one mode (with the core in its own process, the stepping thread
    # only waits for outputs), so each variant is set against the bare loop of its own mode.
    cpu_s = {v: statistics.median(m.cpu_s for m in ms) for v, ms in runs.items() if ms}
    bare_of = {"mp": cpu_s["bare"], "inproc": cpu_s["bare-inproc"]}
    out(
        "cpu ratios (stepping thread CPU, bare of the same mode/variant): "
        + " ".join(
            f"{v}={bare_of[_mode_of(v)] / cpu_s[v]:.2f}" for v in cpu_s if not v.startswith("bare")
        )
    )
    out(f"recording: driver+record/bare={medians.get('driver+record', 0.0) / bare:.2f}")
    # Same process, same steps: what stepview adds to each step, free of machine drift.
    own = [
        (m.cpu_s - m.vllm_cpu_s, m.vllm_cpu_s, m.steps)
        for m in runs.get("driver", [])
        if m.vllm_cpu_s
    ]
    if own:
        extra = statistics.median(mine / steps for mine, _, steps in own)
        share = statistics.median(mine / vllm for mine, vllm, _ in own)
        out(
            f"driver's own CPU per step (same process): {extra * 1e6:.0f} us = {share:.1%} "
            f"of vLLM's step() -> driver/bare {1 / (1 + share):.3f} if that were all"
        )
    out(f"ratios: driver/bare={medians['driver'] / bare:.2f} tui/bare={medians['tui'] / bare:.2f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5, help="runs of each variant (default 5)")
    parser.add_argument("--requests", type=int, default=64, help="requests per run (default 64)")
    parser.add_argument(
        "--max-tokens", type=int, default=64, help="max_tokens of each (default 64)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: 1 round of 16 requests x 16 tokens (still five engine start-ups)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="plumbing check: --quick's size on stepview's fake engine, no vLLM (figures "
        "meaningless)",
    )
    parser.add_argument(
        "--modes",
        default="",
        help="also run driver and tui with the engine core in these modes, e.g. mp,inproc",
    )
    parser.add_argument("--keep", type=Path, help="keep logs, results and traces in this folder")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--workload", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(args.child, args.workload, args.workdir)
        return 0
    modes = [mode for mode in args.modes.split(",") if mode]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        print(f"engine_overhead: unknown mode(s) {unknown}; choose from {MODES}", file=sys.stderr)
        return 2
    order = variants(modes)
    if args.quick or args.smoke:
        args.rounds, args.requests, args.max_tokens = 1, 16, 16
    if shutil.which("tmux") is None:
        print("engine_overhead: the tui variant needs tmux", file=sys.stderr)
        return 2
    env = {**os.environ, **BENCH_ENV}
    if args.smoke:
        env[FAKE_ENGINE_ENV] = "1"
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        print(f"engine_overhead: --keep {args.keep} is not empty", file=sys.stderr)
        return 2
    root = args.keep or Path(tempfile.mkdtemp(prefix="stepview-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    workload_path = root / "workload.jsonl"
    write_workload(workload_path, workload(args.requests, args.max_tokens))
    print(
        f"engine_overhead: {args.requests} requests (greedy/sampled, logprobs, n=2, seeded), "
        f"max_tokens {args.max_tokens}, {args.rounds} round(s), {os.cpu_count()} CPUs, "
        + ("the FAKE engine (--smoke: not vLLM's figures)" if args.smoke else "demo model")
        + "; figures over the engine-busy span (first step to last)",
        flush=True,
    )
    runs: dict[str, list[Measurement]] = {v: [] for v in order}
    try:
        for round_no in range(args.rounds):
            shift = round_no % len(order)
            for variant in order[shift:] + order[:shift]:
                workdir = root / f"r{round_no}-{variant.replace('+', '-').replace('@', '-')}"
                workdir.mkdir()
                if variant.startswith("tui"):
                    measurement = run_tui(workload_path, args.requests, workdir, env, variant)
                else:
                    measurement = run_child(variant, workload_path, workdir, env)
                runs[variant].append(measurement)
                print(
                    f"  round {round_no + 1} {variant:<14} {measurement.steps} steps "
                    f"in {measurement.busy_s:.3f} s: {measurement.steps_per_s:.1f} steps/s, "
                    f"{measurement.tokens_per_s:.0f} tok/s",
                    flush=True,
                )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    report(runs, print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
