"""What the TUI costs at scale, in a real terminal: by default 1,000 running, 50 waiting and
10,000 finished requests; the production size of the goals is ``--waiting 100000 --running
4000 --finished 1000000`` (about 3 minutes, most of it building and weighing the snapshots).

The app runs in a child process on a pseudo-terminal of 120x40 (Textual draws exactly as it
would for a user; the parent plays the terminal and reads every byte). Its source is scripted:
all snapshots are built before the app starts (shaped as the driver shapes them, see
``ui_scale_source``), and a thread publishes them at a fixed rate by swapping one reference,
like the driver does. The producer therefore costs the UI nothing and every figure below is
the UI's own:

* snapshot to screen: from the moment the app's poll picks a new snapshot up to the end of the
  write of the frame that shows it (``App._display``), p50 and p95; and the same from the
  moment the snapshot was published, which adds the wait for the next poll (up to 1/15 s);
* frame cost: CPU time of the UI process per frame drawn, and its share of the wall clock.
  This is the figure that decides what watching costs the engine: both threads share one
  GIL, so an engine step slows down by about the UI's share (see engine_overhead.py);
* redraws per second while snapshots arrive far faster (must stay at or below 15);
* memory, the app's own against what it shows. RSS of the measured run: ``snapshots`` is what
  the process grew by while building them, ``app`` what it grew by from then to the app's end
  (Textual, the widgets, the rows they cache: the app's own memory). tracemalloc, in a second
  run of the same script (tracing slows every allocation down, so it times nothing):
  ``snapshots`` every byte the snapshots hold, ``first`` the first one alone (the finished
  history and the queue; the others share into it), ``app`` the bytes allocated from the end
  of the build to the app's end and not freed, ``peak`` the most held at once meanwhile.
  Tracing the build is most of that run (a minute at the production size): the first snapshot
  is weighed on the way, never built twice;
* history: bytes that one request costs per step kept in the driver's history
  (``Driver(history_size=...)``, on the deterministic fake engine: no vLLM needed).

``--quick`` prints the same lines at a small size (50 running, 500 finished, 60 snapshots, a
history run of 16 requests): a smoke test of the plumbing in ~15 s, not a figure at scale.
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
import tempfile
import termios
import threading
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.children import child_env, module_command
from benchmarks.ui_scale_source import (
    HISTORY_SIZE,
    SPECS,
    ScriptedSource,
    iter_snapshots,
    prompt_text,
)
from stepview.model.snapshot import StepSnapshot

SIZE = (120, 40)
WARMUP_S = 1.5  # first frames (layout of 11,000 rows) before the measured window opens
Reads = list[tuple[float, int]]  # (time, bytes) of each read from the terminal
QUICK = {"running": 50, "waiting": 10, "finished": 500, "snapshots": 60}
"""``--quick``'s sizes: every line printed, at a size that says nothing about scale."""
QUICK_HISTORY = (16, 16)  # requests, max_tokens of the history run with --quick


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
    traced_start = tracemalloc.get_traced_memory()[0] if tracing else 0
    traced_first = 0
    snapshots: list[StepSnapshot] = []
    # The collector would walk every object built so far, again and again: at a million
    # finished requests that was half the build. Nothing here is garbage until the app runs.
    gc.disable()
    for snapshot in iter_snapshots(args.running, args.waiting, args.finished, args.snapshots):
        snapshots.append(snapshot)
        if tracing and len(snapshots) == 1:  # one snapshot, before the others share into it
            traced_first = tracemalloc.get_traced_memory()[0] - traced_start
    gc.enable()
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
            spec = replace(SPECS[i % 3], max_tokens=max_tokens)
            driver.send(AddRequest(f"h{i}", prompt_text(i), spec))
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
    command = module_command(
        "benchmarks.ui_scale",
        *("--child", mode, "--out", str(out)),
        *("--running", str(args.running), "--waiting", str(args.waiting)),
        *("--finished", str(args.finished), "--snapshots", str(args.snapshots)),
        *("--rate", str(args.rate)),
    )
    env = child_env({**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"})
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
    small = ", ".join(f"{value} {name}" for name, value in QUICK.items())
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke test: every line at a small size ({small}; flags given win), not at scale",
    )
    parser.add_argument("--child", choices=("ui", "memory"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        args.out.write_text(json.dumps(run_app_child(args)))
        return 0
    if args.quick:  # building and laying out 11 000 requests was most of a 50 s smoke test
        parser.set_defaults(**QUICK)
        args = parser.parse_args(argv)
    print(
        f"ui_scale: {args.running} running, {args.waiting} waiting, {args.finished} finished; "
        f"{args.snapshots} snapshots at {args.rate:.0f}/s into a {SIZE[0]}x{SIZE[1]} pty",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="stepview-ui-scale-") as tmp:
        ui, reads = _child("ui", args, Path(tmp) / "ui.json")
        memory, _ = _child("memory", args, Path(tmp) / "memory.json")
    report(ui, reads, memory, history_bytes(*QUICK_HISTORY) if args.quick else history_bytes())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
