"""What the TUI costs at scale: 1,000 running and 10,000 finished requests, in a real terminal.

The app runs in a child process on a pseudo-terminal of 120x40 (Textual draws exactly as it
would for a user; the parent plays the terminal and reads every byte). Its source is scripted:
all snapshots are built before the app starts, and a thread publishes them at a fixed rate by
swapping one reference, like the driver does. The producer therefore costs the UI nothing
and every figure below is the UI's own:

* snapshot to screen: from the moment the app's poll picks a new snapshot up to the end of the
  write of the frame that shows it (``App._display``), p50 and p95; and the same from the
  moment the snapshot was published, which adds the wait for the next poll (up to 1/15 s);
* frame cost: CPU time of the UI process per frame drawn, and its share of the wall clock.
  This is the figure that decides what watching costs the engine: both threads share one
  GIL, so an engine step slows down by about the UI's share (see engine_overhead.py);
* redraws per second while snapshots arrive far faster (must stay at or below 15);
* memory: RSS, and tracemalloc's count of the snapshots and of what the app adds (a second
  run, since tracing slows everything down);
* history: bytes that one request costs per step kept in the driver's history
  (``Driver(history_size=...)``, on the deterministic fake engine: no vLLM needed).
"""

from __future__ import annotations

import argparse
import fcntl
import gc
import json
import os
import pty
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import tracemalloc
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stepview.model.commands import Command
from stepview.model.grow import Frozen
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import (
    Completion,
    EngineCounters,
    EngineInfo,
    EngineState,
    RecentStep,
    RequestState,
    RequestView,
    StepSnapshot,
    Timings,
)

SIZE = (120, 40)
STEP_S = 0.01  # the scripted engine's clock advances this much per snapshot
WARMUP_S = 1.5  # first frames (layout of 11,000 rows) before the measured window opens
HISTORY_SIZE = 2000  # the TUI's default --history
Reads = list[tuple[float, int]]  # (time, bytes) of each read from the terminal
_TEXT = (
    "the engine steps tokens in a batch while requests wait their turn for the cache and every "
    "prompt is scheduled prefilled and decoded until it reaches its length"
)
_WORDS = _TEXT.split()
_SPECS = (
    SamplingSpec(temperature=0.0, max_tokens=256, logprobs=1),
    SamplingSpec(temperature=0.8, top_k=5, max_tokens=256, seed=7),
    SamplingSpec(n=2, temperature=0.8, top_p=0.95, max_tokens=256, seed=9),
)


# -- scripted snapshots ------------------------------------------------------------------------


@dataclass(slots=True)
class _Running:
    """One running request of the script: its token lists grow in place, as the driver's do."""

    request_id: str
    prompt: str
    spec: SamplingSpec
    arrival: float
    tokens: list[list[int]] = field(default_factory=list)
    pieces: list[list[str]] = field(default_factory=list)  # text appended per step

    def grow(self, step: int) -> None:
        """One more token (and its text) for every sample."""
        for ids, text in zip(self.tokens, self.pieces, strict=True):
            ids.append(step)
            text.append(_WORDS[step % len(_WORDS)] + " ")

    def view(self, now: float, state: RequestState = RequestState.DECODING) -> RequestView:
        completions = tuple(
            Completion(i, Frozen(text, len(text)), Frozen(ids, len(ids)))
            for i, (ids, text) in enumerate(zip(self.tokens, self.pieces, strict=True))
        )
        timings = Timings(self.arrival, self.arrival + 0.01, self.arrival + 0.02)
        if state is RequestState.FINISHED:
            timings = Timings(self.arrival, self.arrival + 0.01, self.arrival + 0.02, now)
            completions = tuple(c._replace(finish_reason="length") for c in completions)
        return RequestView(
            self.request_id,
            self.prompt,
            self.spec,
            state,
            timings,
            16,
            16,
            0,
            (),
            None,
            completions,
        )


def _prompt(i: int) -> str:
    return " ".join(_WORDS[(i * 7 + k) % len(_WORDS)] for k in range(6 + i % 20))


def build_snapshots(
    running: int, waiting: int, finished: int, count: int, churn: int = 2
) -> list[StepSnapshot]:
    """``count`` consecutive snapshots: every running request gains a token per snapshot,
    ``churn`` of them finish and as many new ones start; the waiting ones stay queued.

    Shaped as the driver shapes them: one append-only list behind every ``finished`` view,
    a new :class:`RequestView` only for requests that changed.
    """
    info = EngineInfo("ui-scale-script", vllm_version="script", max_num_seqs=running)
    done: list[RequestView] = []
    for i in range(finished):
        run = _Running(f"f{i}", _prompt(i), _SPECS[i % 3], 0.0)
        run.tokens = [[] for _ in range(run.spec.n)]
        run.pieces = [[] for _ in range(run.spec.n)]
        for step in range(32):
            run.grow(step)
        done.append(run.view(1.0, RequestState.FINISHED))
    queue = [
        RequestView(f"w{i}", _prompt(i), _SPECS[i % 3], RequestState.WAITING, Timings(0.0))
        for i in range(waiting)
    ]
    active: deque[_Running] = deque()
    next_id = 0

    def start(now: float) -> None:
        nonlocal next_id
        run = _Running(f"r{next_id}", _prompt(next_id), _SPECS[next_id % 3], now)
        run.tokens = [[] for _ in range(run.spec.n)]
        run.pieces = [[] for _ in range(run.spec.n)]
        active.append(run)
        next_id += 1

    for _ in range(running):
        start(0.0)
    recent: deque[RecentStep] = deque(maxlen=120)
    snapshots = []
    for step in range(1, count + 1):
        now = 1.0 + step * STEP_S
        for _ in range(churn):
            done.append(active.popleft().view(now, RequestState.FINISHED))
            start(now)
        for run in active:
            run.grow(step)
        views = tuple(run.view(now) for run in active)
        counters = EngineCounters(running, waiting, 0.5, 0, running + churn)
        recent.append(RecentStep(step, now, STEP_S, running, waiting, 0.5, running + churn))
        snapshots.append(
            StepSnapshot(
                step=step,
                clock=now,
                engine_state=EngineState.RUNNING,
                info=info,
                step_time=STEP_S,
                counters=counters,
                active=(*queue, *views),
                finished=Frozen(done, len(done)),
                recent=tuple(recent),
                total_generated=step * running,
            )
        )
    return snapshots


class ScriptedSource:
    """A :class:`~stepview.model.source.SnapshotSource` that publishes prepared snapshots.

    ``latest()`` notes when the app first picked each snapshot up; a thread publishes one
    snapshot every ``1 / rate`` seconds after ``warmup`` seconds, then asks the app to exit.
    """

    accepts_requests = True

    def __init__(self, snapshots: Sequence[StepSnapshot], rate: float, warmup: float) -> None:
        self.snapshots = snapshots
        self.rate = rate
        self.warmup = warmup
        self.index = {id(s): i for i, s in enumerate(snapshots)}
        self.published: list[float | None] = [None] * len(snapshots)
        self.picked: list[float | None] = [None] * len(snapshots)
        self._latest = snapshots[0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scripted-source", daemon=True)
        self.on_done: Callable[[], None] = lambda: None
        # (wall, process CPU) when publishing starts and ends: the measured window.
        self.cpu_marks: list[tuple[float, float]] = []

    def start(self) -> None:
        self.published[0] = time.perf_counter()
        self._thread.start()

    def _run(self) -> None:
        if self._stop.wait(self.warmup):
            return
        begin = time.perf_counter()
        self.cpu_marks.append((begin, time.process_time()))
        for i in range(1, len(self.snapshots)):
            delay = begin + i / self.rate - time.perf_counter()
            if delay > 0 and self._stop.wait(delay):
                return
            self.published[i] = time.perf_counter()
            self._latest = self.snapshots[i]
        if not self._stop.wait(0.5):  # let the last snapshot reach the screen
            self.cpu_marks.append((time.perf_counter(), time.process_time()))
            self.on_done()

    def latest(self) -> StepSnapshot:
        snapshot = self._latest
        i = self.index[id(snapshot)]
        if self.picked[i] is None:
            self.picked[i] = time.perf_counter()
        return snapshot

    def history(self) -> Sequence[StepSnapshot]:
        last = max(i for i, t in enumerate(self.published) if t is not None)
        return tuple(self.snapshots[max(0, last - HISTORY_SIZE + 1) : last + 1])

    def send(self, command: Command) -> None:
        pass

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


# -- the child: the app in the pty -------------------------------------------------------------


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run_app_child(args: argparse.Namespace) -> dict[str, Any]:
    """Build the snapshots, run the app on them in this terminal, return the raw figures."""
    from stepview.ui.app import StepviewApp

    tracing = args.child == "memory"
    if tracing:
        tracemalloc.start()
    rss_start = _rss_mb()
    traced_first = 0
    if tracing:  # what one snapshot of this size holds, before the others share into it
        start = tracemalloc.get_traced_memory()[0]
        first = build_snapshots(args.running, args.waiting, args.finished, 1)
        traced_first = tracemalloc.get_traced_memory()[0] - start
        del first
        gc.collect()
    traced_start = tracemalloc.get_traced_memory()[0] if tracing else 0
    snapshots = build_snapshots(args.running, args.waiting, args.finished, args.snapshots)
    gc.collect()
    rss_built = _rss_mb()
    traced_built = tracemalloc.get_traced_memory()[0] if tracing else 0
    if tracing:
        tracemalloc.reset_peak()
    source = ScriptedSource(snapshots, args.rate, WARMUP_S)
    frames: list[tuple[float, int]] = []

    app = StepviewApp(source)
    display = app._display

    def measured_display(screen: Any, renderable: Any) -> None:
        """Textual's write of a frame to the terminal, timed, noting which snapshot it shows."""
        display(screen, renderable)
        if renderable is not None and app.shown is not None:
            frames.append((time.perf_counter(), source.index.get(id(app.shown), -1)))

    app._display = measured_display  # type: ignore[method-assign]
    source.on_done = lambda: app.call_from_thread(app.exit)
    app.run()
    if len(source.cpu_marks) != 2:
        raise RuntimeError("the app ended before the script did")
    traced_end, traced_peak = tracemalloc.get_traced_memory() if tracing else (0, 0)
    return {
        "published": source.published,
        "picked": source.picked,
        "frames": frames,
        "cpu_marks": source.cpu_marks,
        "rss_start_mb": rss_start,
        "rss_built_mb": rss_built,
        "rss_end_mb": _rss_mb(),
        "traced_first": traced_first,
        "traced_snapshots": traced_built - traced_start,
        "traced_app": traced_end - traced_built,
        "traced_app_peak": traced_peak - traced_built,
    }


def history_bytes(requests: int = 64, max_tokens: int = 64) -> dict[str, float]:
    """Bytes the driver's history keeps per request per step, on the fake engine.

    The same deterministic run twice, with ``history_size`` 1 and :data:`HISTORY_SIZE`; the
    difference in traced memory is what the kept snapshots hold (token lists are shared
    between snapshots, so they cancel out), divided by the request-steps they show.
    """
    from stepview.engine.driver.loop import Driver
    from stepview.model.commands import AddRequest
    from stepview.testing.fake_engine import FakeEngine

    def run(history_size: int) -> tuple[int, Driver]:
        engine = FakeEngine(max_num_seqs=32, max_num_batched_tokens=2048, num_kv_blocks=4096)
        driver = Driver(lambda phase: engine, history_size=history_size)
        for i in range(requests):
            spec = replace(_SPECS[i % 3], max_tokens=max_tokens)
            driver.send(AddRequest(f"h{i}", _prompt(i), spec))
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        driver.start()
        while len(driver.latest().finished) < requests:
            time.sleep(0.01)
        driver.stop()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, driver

    tracemalloc.start()
    small, _ = run(1)
    large, driver = run(HISTORY_SIZE)
    tracemalloc.stop()
    history = driver.history()
    request_steps = sum(len(s.active) for s in history[:-1])
    return {
        "bytes": large - small,
        "snapshots": len(history),
        "request_steps": request_steps,
        "per_request_step": (large - small) / max(1, request_steps),
    }


# -- the parent: the terminal ------------------------------------------------------------------


def _in_pty(command: list[str], env: dict[str, str], timeout: float) -> Reads:
    """Run ``command`` on a new pseudo-terminal of :data:`SIZE`; return (time, bytes) reads."""
    master, slave = pty.openpty()
    columns, rows = SIZE
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    process = subprocess.Popen(
        command, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    reads: Reads = []
    tail = bytearray()

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: the child side is closed
                return
            if not data:
                return
            reads.append((time.perf_counter(), len(data)))
            tail[:] = (bytes(tail) + data)[-4000:]

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        code = process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    finally:
        reader.join(5)
        os.close(master)
    if code != 0:
        screen = tail.decode("utf-8", "replace")
        raise RuntimeError(f"{' '.join(command)} exited with {code}; terminal tail:\n{screen}")
    return reads


def _child(mode: str, args: argparse.Namespace, out: Path) -> tuple[dict[str, Any], Reads]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        mode,
        "--out",
        str(out),
        *("--running", str(args.running), "--waiting", str(args.waiting)),
        *("--finished", str(args.finished), "--snapshots", str(args.snapshots)),
        *("--rate", str(args.rate)),
    ]
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    reads = _in_pty(command, env, timeout=600)
    return json.loads(out.read_text()), reads


def _percentiles(values: Sequence[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    if not ordered:
        return float("nan"), float("nan"), float("nan")
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95, ordered[-1]


def report(
    ui: dict[str, Any], reads: Reads, memory: dict[str, Any], hist: dict[str, float]
) -> None:
    """Print the figures (one labelled line each; tests/bench checks their format)."""
    published, picked = ui["published"], ui["picked"]
    (start, cpu_start), (end, cpu_end) = ui["cpu_marks"]
    frames = [(t, i) for t, i in ui["frames"] if start <= t <= end]
    pickup, publish = [], []
    shown = -1
    for t, i in frames:
        if i > shown and i > 0:
            shown = i
            pickup.append((t - picked[i]) * 1000)
            publish.append((t - published[i]) * 1000)
    window = end - start
    mib = 1024 * 1024
    written = sum(n for t, n in reads if start <= t <= end)
    p = _percentiles(pickup)
    print(
        f"snapshot-to-screen: p50={p[0]:.1f}ms p95={p[1]:.1f}ms max={p[2]:.1f}ms (n={len(pickup)})"
    )
    p = _percentiles(publish)
    print(
        f"publish-to-screen: p50={p[0]:.1f}ms p95={p[1]:.1f}ms max={p[2]:.1f}ms (incl. poll wait)"
    )
    cpu = cpu_end - cpu_start
    print(
        f"frame cost: {cpu / max(1, len(frames)) * 1000:.1f}ms UI CPU per frame, "
        f"UI CPU share {cpu / window:.1%}, {written / max(1, len(frames)) / 1024:.1f} KiB per frame"
    )
    times = [t for t in published[1:] if t is not None]
    rate = (len(times) - 1) / (times[-1] - times[0])
    print(f"redraws: {len(frames) / window:.1f}/s while snapshots arrive at {rate:.0f}/s")
    built = ui["rss_built_mb"] - ui["rss_start_mb"]
    print(
        f"memory: rss={ui['rss_end_mb']:.0f}MB (snapshots +{built:.0f}MB, "
        f"app +{ui['rss_end_mb'] - ui['rss_built_mb']:.0f}MB) "
        f"tracemalloc: snapshots={memory['traced_snapshots'] / mib:.0f}MB "
        f"(first {memory['traced_first'] / mib:.1f}MB, then "
        f"{(memory['traced_snapshots'] - memory['traced_first']) / (len(published) - 1) / mib:.2f}"
        f"MB each) "
        f"app=+{memory['traced_app'] / mib:.1f}MB peak=+{memory['traced_app_peak'] / mib:.1f}MB"
    )
    print(
        f"history: {hist['per_request_step']:.0f} bytes per request per step "
        f"({hist['snapshots']} snapshots kept, {hist['request_steps']} request-steps, "
        f"history_size={HISTORY_SIZE})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--running", type=int, default=1000)
    parser.add_argument("--waiting", type=int, default=50)
    parser.add_argument("--finished", type=int, default=10_000)
    parser.add_argument("--snapshots", type=int, default=300, help="snapshots published")
    parser.add_argument("--rate", type=float, default=100.0, help="snapshots per second")
    parser.add_argument("--quick", action="store_true", help="CI smoke: 60 snapshots")
    parser.add_argument("--child", choices=("ui", "memory"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        args.out.write_text(json.dumps(run_app_child(args)))
        return 0
    if args.quick:
        args.snapshots = 60
    print(
        f"ui_scale: {args.running} running, {args.waiting} waiting, {args.finished} finished; "
        f"{args.snapshots} snapshots at {args.rate:.0f}/s into a {SIZE[0]}x{SIZE[1]} pty",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="stepview-ui-scale-") as tmp:
        ui, reads = _child("ui", args, Path(tmp) / "ui.json")
        memory, _ = _child("memory", args, Path(tmp) / "memory.json")
    report(ui, reads, memory, history_bytes())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
