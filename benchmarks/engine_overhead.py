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

Run it under the engine lock on a shared machine (``flock /tmp/stepview-engine.lock ...``): with
2 cores, anything else running slows whichever variant it overlaps. Even so, single runs of the
same variant differ by up to ~10 % here; trust medians over several rounds, not one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from stepview.engine.driver import run_stats
from stepview.engine.own.environment import DEFAULT_MULTIPROCESSING
from stepview.files.prompts_file import read_prompts
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec

BASE_VARIANTS = ("bare", "bare-inproc", "driver", "driver+record", "tui")
MODES = ("mp", "inproc")
# Same for every variant, forced (not defaults): one OpenMP thread, no hub, no torch.compile
# (see the platform notes for why each matters on 2 cores). Where the engine core runs is
# set per variant (:func:`mode_env`).
BENCH_ENV = {
    "OMP_NUM_THREADS": "1",
    "HF_HUB_OFFLINE": "1",
    "TORCH_COMPILE_DISABLE": "1",
    # The tiny random-weight model, as in every figure in docs/performance.md: the cost of
    # watching shows best beside the cheapest steps.
    "STEPVIEW_DEMO_MODEL": "demo-tiny",
}
MULTIPROCESSING_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"
TUI_SIZE = (120, 40)
# The loading view's title: the first frame stepview draws (before vLLM is even imported).
FIRST_FRAME_TEXT = "Starting the engine"
CHILD_TIMEOUT_S = 300.0
POLL_S = 0.05
FIRST_FRAME_POLL_S = 0.01

# Prompt words (noise to the random-weight demo model either way).
_TEXT = (
    "the engine steps tokens in a batch while requests wait their turn for the cache and "
    "every prompt is scheduled then prefilled then decoded until it reaches its length or "
    "a stop token robot may not injure a human being to be or not what is meaning of life"
)
_WORDS = _TEXT.split()


@dataclass(frozen=True, slots=True)
class Measurement:
    """One variant, one run: what the child process (or the TUI's run stats) reported."""

    variant: str
    steps: int
    busy_s: float
    output_tokens: int
    stepping_s: float  # time inside step() (the engine's share of the busy span)
    cpu_s: float  # CPU time of the stepping thread over the busy span
    first_frame_s: float | None = None  # tui only: launch to the loading view on screen
    # driver variants: CPU time inside vLLM's own ``LLMEngine.step()`` over the busy span, so
    # ``cpu_s - vllm_cpu_s`` is stepview's own work per step, measured in the same process
    # (immune to the run-to-run drift that blurs the side-by-side ratios on a shared box).
    vllm_cpu_s: float | None = None

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.busy_s

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.busy_s


# -- the workload ----------------------------------------------------------------------------


def workload(count: int, max_tokens: int, seed: int = 1234) -> list[tuple[str, SamplingSpec]]:
    """``count`` prompts with a fixed mix of sampling parameters, all seeded (reproducible).

    The mix follows vLLM's example (greedy with logprobs and prompt logprobs; top-k with a
    presence penalty; n=2 with top-p) and adds plain sampling, logprobs=5 and n=2 with
    logprobs, so the per-step work of every output path is in it.
    """
    rng = random.Random(seed)
    mix = (
        {"temperature": 0.0, "logprobs": 1, "prompt_logprobs": 1},
        {"temperature": 0.8, "top_k": 5, "presence_penalty": 0.2},
        {"n": 2, "temperature": 0.8, "top_p": 0.95, "frequency_penalty": 0.1},
        {"temperature": 0.0},
        {"temperature": 1.0, "logprobs": 5},
        {"n": 2, "temperature": 0.7, "logprobs": 2},
        {"temperature": 0.9, "top_p": 0.9, "min_p": 0.05},
        {"temperature": 0.6, "repetition_penalty": 1.1},
    )
    requests = []
    for i in range(count):
        words = rng.choices(_WORDS, k=rng.randint(4, 48))
        params = {**mix[i % len(mix)], "max_tokens": max_tokens, "seed": 1000 + i}
        requests.append((" ".join(words), SamplingSpec.from_dict(params)))
    return requests


def write_workload(path: Path, requests: Sequence[tuple[str, SamplingSpec]]) -> None:
    """A stepview prompts file (what ``--prompts`` reads)."""
    with path.open("w", encoding="utf-8") as out:
        for i, (prompt, spec) in enumerate(requests):
            line = {"id": f"b{i}", "prompt": prompt, "params": spec.to_dict()}
            out.write(json.dumps(line) + "\n")


def variants(modes: Sequence[str]) -> tuple[str, ...]:
    """The variants of one round: the base ones, plus driver and tui in each mode asked for."""
    extra = tuple(f"{kind}@{mode}" for mode in modes for kind in ("driver", "tui"))
    return BASE_VARIANTS + extra


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


def _env_for(env: dict[str, str], variant: str) -> dict[str, str]:
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
    # Latest length of every sample: for n=2 the final output carries only one of the two.
    lengths: dict[tuple[str, int], int] = {}
    steps = 0
    stepping = 0.0
    clock = time.perf_counter
    first, first_cpu = clock(), time.thread_time()
    end = first
    while engine.has_unfinished_requests():
        start = clock()
        outputs = engine.step()
        end = clock()
        stepping += end - start
        steps += 1
        for output in outputs:
            for completion in output.outputs:  # type: ignore[union-attr]  # never pooling here
                lengths[(output.request_id, completion.index)] = len(completion.token_ids)
    cpu = time.thread_time() - first_cpu
    engine.engine_core.shutdown()
    return Measurement(name, steps, end - first, sum(lengths.values()), stepping, cpu)


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
    prepare_vllm_environment(log_path)
    vllm_cpu = _time_vllm_step()
    holder = EngineArgsHolder()
    sinks: list[SnapshotSink] = (
        [
            TraceRecorder(workdir / "trace.jsonl", holder.header_fields),
            ResultsWriter(workdir / "results.jsonl"),
        ]
        if name == "driver+record"
        else []
    )
    driver = live_driver([], log_path, holder=holder, sinks=sinks)
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


def _time_vllm_step() -> list[float]:
    """Wrap ``vllm.LLMEngine.step`` to add up its thread CPU time; returns the running total.

    The wrapper's own cost (two clock reads, ~1 us per step) lands on stepview's side.
    """
    from vllm import LLMEngine

    total = [0.0]
    step = LLMEngine.step

    def timed_step(self: Any) -> Any:
        start = time.thread_time()
        try:
            return step(self)
        finally:
            total[0] += time.thread_time() - start

    LLMEngine.step = timed_step  # type: ignore[method-assign]
    return total


def child_main(variant: str, workload_path: Path, workdir: Path) -> None:
    """Run one variant and print its :class:`Measurement` as the last line of stdout."""
    requests = read_prompts(workload_path)
    if variant.startswith("bare"):
        measurement = _child_bare(requests, workdir, variant)
    else:
        measurement = _child_driver(requests, workdir, variant)
    print(json.dumps(asdict(measurement)), flush=True)


def _run_child(
    variant: str, workload_path: Path, workdir: Path, env: dict[str, str]
) -> Measurement:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        variant,
        "--workload",
        str(workload_path),
        "--workdir",
        str(workdir),
    ]
    done = subprocess.run(
        command,
        env=_env_for(env, variant),
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


def stepview_command() -> list[str]:
    """The installed ``stepview`` script next to this Python, else ``python -m stepview``."""
    script = Path(sys.executable).parent / "stepview"
    return [str(script)] if script.exists() else [sys.executable, "-m", "stepview"]


class Tmux:
    """A private tmux server (its own socket) holding one detached session."""

    def __init__(self, name: str, env: dict[str, str]) -> None:
        self._base = ["tmux", "-L", name]
        self._env = env

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._base, *args], env=self._env, capture_output=True, text=True, check=False
        )

    def start(self, command: str) -> None:
        width, height = TUI_SIZE
        done = self._run(
            "new-session", "-d", "-x", str(width), "-y", str(height), "-s", "b", command
        )
        if done.returncode != 0:
            raise RuntimeError(f"tmux new-session failed: {done.stderr.strip()}")

    def screen(self) -> str:
        return self._run("capture-pane", "-p", "-t", "b").stdout

    def press(self, key: str) -> None:
        self._run("send-keys", "-t", "b", key)

    def alive(self) -> bool:
        return self._run("has-session", "-t", "b").returncode == 0

    def cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by the pane's processes: the program it runs."""
        import psutil  # a vLLM dependency

        pid = int(self._run("list-panes", "-t", "b", "-F", "#{pane_pid}").stdout.split()[0])
        pane = psutil.Process(pid)
        total = 0.0
        for process in (pane, *pane.children(recursive=True)):
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                total += times.user + times.system
        return total

    def kill(self) -> None:
        self._run("kill-server")


def _wait(condition: Callable[[], bool], timeout: float, what: str, interval: float) -> float:
    """Poll ``condition`` until true; returns when it became true (perf_counter)."""
    deadline = time.perf_counter() + timeout
    while True:
        if condition():
            return time.perf_counter()
        if time.perf_counter() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def _count_lines(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(1 for line in handle if line.endswith(b"\n"))
    except FileNotFoundError:
        return 0


def run_tui(
    workload_path: Path, count: int, workdir: Path, env: dict[str, str], name: str = "tui"
) -> Measurement:
    """The real ``stepview`` in tmux: launch, first frame, all results, ``q``, its run stats."""
    results, log_path, rc_path = workdir / "results.jsonl", workdir / "stepview.log", workdir / "rc"
    stats_path = workdir / "run_stats.json"
    argv = [
        *stepview_command(),
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
    tmux = Tmux(f"stepview-bench-{os.getpid()}-{workdir.name}", _env_for(env, name))
    launched = time.perf_counter()
    tmux.start(command)
    try:
        seen = _wait(
            lambda: FIRST_FRAME_TEXT in tmux.screen() or not tmux.alive(),
            60.0,
            "the first frame",
            FIRST_FRAME_POLL_S,
        )
        first_frame = seen - launched
        _wait(
            lambda: _count_lines(results) >= count or not tmux.alive(),
            CHILD_TIMEOUT_S,
            "every result",
            POLL_S,
        )
        tmux.press("q")
        _wait(lambda: not tmux.alive(), 60.0, "stepview to quit", POLL_S)
    finally:
        tmux.kill()
    code = rc_path.read_text().strip() if rc_path.exists() else "?"
    log_text = log_path.read_text(encoding="utf-8", errors="replace") if log_path.exists() else ""
    stats = run_stats.load(stats_path) if stats_path.exists() else None
    if code != "0" or stats is None or _count_lines(results) < count:
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
        help="CI smoke: 1 round of 16 requests x 16 tokens (< 1 min)",
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
    if args.quick:
        args.rounds, args.requests, args.max_tokens = 1, 16, 16
    if shutil.which("tmux") is None:
        print("engine_overhead: the tui variant needs tmux", file=sys.stderr)
        return 2
    env = {**os.environ, **BENCH_ENV}
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
        f"demo model; figures over the engine-busy span (first step to last)",
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
                    measurement = _run_child(variant, workload_path, workdir, env)
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
