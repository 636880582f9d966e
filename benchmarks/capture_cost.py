"""What watching costs per engine step, and how it grows with the requests the engine holds.

A server in trouble holds thousands of waiting requests; this measures stepview's work per
engine-core step with 64, 512, 2 048 and 8 192 requests held (``max_num_seqs`` 32: the rest
wait), each size in a fresh process, on the demo model with the engine core in the measuring
process (the plug-in's code is the same in a core process; only here can one process time
everything), with ``time.perf_counter_ns``:

* ``capture``: building the step's record inside the engine core (:meth:`CoreCapture.capture`);
* ``log``: what the log of ends adds inside the engine core, for a watch that loses records
  to catch up from (:meth:`EndLog.add`: each ending encoded and kept; nothing for the
  requests that did not end in the step);
* ``publish``: what a core process adds on top: encoding the record and the non-blocking zmq
  send (:meth:`FactsPublisher.deliver`, to a subscriber on an ipc socket, the records of
  ``STEPVIEW_PUBLISH_EVERY_MS`` sent together, as a server's plug-in sends them);
* ``view``: stepview's side, turning the step's records into the driver's entries (states,
  progress, KV blocks, why each waits: ``VllmEngine``'s read of them, in stepview's process);
* ``watch``: what an attached stepview does with the published record instead: decoding it
  and reading it into a step (:meth:`WatchedCore.read`: adoptions, token tails, entries);
* ``driver``: the rest of stepview's side of one step, beyond vLLM's: the ledger folding the
  outputs and entries in, the frozen snapshot, the run insight (timelines, alerts) and the
  trace encoder;

each against the engine core's own step (``EngineCore.step``: schedule, model, update), and
only over the steps that held at least half the requests (the start of the run: the queue is
long), the first step left out: its record is the full one (every request, whole: the
in-process listener's, as stepview's own engine has it; its cost is printed apart). The last
line is ``scaling: capture_us=A,B,C,D publish_us=... view_us=... watch_us=... driver_us=...
attach_ms=A,B,C,D`` (the four sizes in order); the line before it, each size's share of a
step. ``attach_ms`` is what a watch joining the server costs it: the most one step's plug-in
work grew when a second watch subscribed, and when it resynced, with as many requests held
again, garbage collections that ran in it left out (its own line gives it with them too;
:mod:`benchmarks.capture_attach`).

Beside the capture, the line after the full record's says what watching for a hung step costs
the engine core per step: the plug-in's stack watch (:mod:`stepview.engine.plugin.stacks`, a
thread that wakes twice a second and keeps faulthandler's watchdog armed: its CPU time over
the run, per step, and its wakes), against what arming faulthandler's watchdog around each
step would cost (``dump_traceback_later`` before the step, ``cancel_dump_traceback_later``
after, timed at every step of a second run of 64 requests on the same engine, outside the
step's own time: the two share faulthandler's one watchdog, so they cannot run together).

Usage: ``python -m benchmarks capture_cost [--requests 64,512,2048,8192] [--max-tokens 16]``
(``--quick``: 16 requests only, for a smoke test); run it with nothing else heavy on the
machine (``flock /tmp/stepview-engine.lock ...`` on a shared one).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.capture_attach import attach_figures, attach_line
from benchmarks.children import child_env, module_command
from benchmarks.workload import BENCH_ENV, workload
from stepview.model.address import zmq_endpoint

SIZES = (64, 512, 2048, 8192)
MAX_NUM_SEQS = 32
ARMED_REQUESTS = 64  # the second run's, arming faulthandler's watchdog around each step
FIGURES = ("capture", "log", "publish", "view", "watch", "driver")


def _timed(cls: Any, name: str, into: list[int]) -> None:
    """Wrap ``cls.name`` so each call's duration (ns) is appended to ``into``."""
    original = getattr(cls, name)
    clock = time.perf_counter_ns

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return original(*args, **kwargs)
        finally:
            into.append(clock() - start)

    setattr(cls, name, wrapper)


def _mean_us(samples: Sequence[int]) -> float:
    return statistics.fmean(samples) / 1000 if samples else 0.0


def measure(requests: int, max_tokens: int) -> dict[str, Any]:
    """One size, in this process: the mean µs per step of each figure, and the step's."""
    from stepview.engine.own.environment import prepare_vllm_environment

    workdir = Path(tempfile.mkdtemp(prefix="stepview-capture-"))
    prepare_vllm_environment(workdir / "vllm.log")
    from vllm.v1.engine.core import EngineCore

    from stepview.engine.driver.ledger import RequestLedger
    from stepview.engine.own.tiny_model import TINY_MODEL_NAME, tiny_engine_args
    from stepview.engine.own.vllm_engine import VllmEngine
    from stepview.engine.plugin.capture import CoreCapture
    from stepview.engine.plugin.config import ListenerSink, publish_every
    from stepview.engine.plugin.end_log import EndLog
    from stepview.engine.plugin.publisher import FactsPublisher
    from stepview.engine.plugin.stacks import StackWatch, core_busy
    from stepview.engine.records.channel import FactsSubscriber
    from stepview.engine.records.stacks import STACKS_AFTER_S
    from stepview.engine.watch.link.watched_core import WatchedCore
    from stepview.insight.run import RunInsight
    from stepview.model.commands import AddRequest
    from stepview.model.engine_api import StepResult
    from stepview.model.snapshot import EngineInfo, EngineState, StepSnapshot
    from stepview.trace.encoder import TraceEncoder

    steps: list[int] = []
    captures: list[int] = []
    publishes: list[int] = []
    views: list[int] = []
    logs: list[int] = []
    _timed(EngineCore, "step", steps)
    # What arming faulthandler's watchdog around each step would cost, timed at every step of
    # a second run (patched before the engine is built: the core binds its step function then).
    pairs: list[int] = []
    arming = [False]
    timed_step = EngineCore.step
    watchdog_file = (workdir / "watchdog").open("wb")

    def armed_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not arming[0]:
            return timed_step(self, *args, **kwargs)
        clock = time.perf_counter_ns
        start = clock()
        faulthandler.dump_traceback_later(3600, file=watchdog_file)
        armed = clock() - start
        try:
            return timed_step(self, *args, **kwargs)
        finally:
            start = clock()
            faulthandler.cancel_dump_traceback_later()
            pairs.append(armed + clock() - start)

    EngineCore.step = armed_step  # type: ignore[method-assign]
    _timed(CoreCapture, "capture", captures)
    _timed(EndLog, "add", logs)
    _timed(FactsPublisher, "deliver", publishes)
    _timed(VllmEngine, "_scheduled", views)
    # Records as a server's plug-in makes them for an attached stepview: with every request's
    # intro, output tokens and end (stepview's own engine reads those from vLLM instead).
    ListenerSink.tails = True
    # ... and every ending in the log of ends a server's publisher keeps (open: someone listens).
    end_log = EndLog()
    end_log.open = True
    ListenerSink.end_log = end_log  # type: ignore[attr-defined]

    engine = VllmEngine.create(
        tiny_engine_args(max_num_seqs=MAX_NUM_SEQS),
        demo_model=True,
        model_label=TINY_MODEL_NAME,
        multiprocess=False,
    )
    address = f"ipc://{workdir}/facts.sock"
    publisher = FactsPublisher(address, publish_every())  # as a server's plug-in sends
    # The stack watch as a server's plug-in runs it (the core here is in this process, where
    # the plug-in leaves it to stepview): on the core's scheduler and capture.
    scheduler = engine.llm_engine.engine_core.engine_core.scheduler
    (workdir / "stacks").mkdir()
    stacks = StackWatch(
        lambda: scheduler._stepview.step,
        core_busy(scheduler),
        publisher=publisher,
        folder=workdir / "stacks",
        after=STACKS_AFTER_S,
    )
    stacks.start(answer_signal=True)
    subscriber = FactsSubscriber(address)
    watched = WatchedCore(0, zmq_endpoint(f"ipc://{workdir}/unused.sock"))
    clock = time.perf_counter
    started = clock()
    ledger = RequestLedger(lambda: clock() - started)
    insight = RunInsight()
    encoder = TraceEncoder(EngineInfo())
    per_step: dict[str, list[int]] = {name: [] for name in ("step", *FIGURES)}
    held: list[int] = []
    timed = {
        "step": steps,
        "capture": captures,
        "log": logs,
        "publish": publishes,
        "view": views,
    }
    seen = dict.fromkeys(timed, 0)
    try:
        if not subscriber.wait_connected(10):
            raise SystemExit("capture_cost: the subscriber did not connect")
        while not publisher.wanted():  # the subscription is in: records will go out
            time.sleep(0.01)
        # The in-process record also goes out as a core process would publish it.
        capture_record = CoreCapture.capture

        def capture_and_publish(self: CoreCapture, *args: Any) -> Any:
            facts = capture_record(self, *args)
            publisher.deliver(facts)
            return facts

        CoreCapture.capture = capture_and_publish  # type: ignore[method-assign,assignment]
        for i, (prompt, spec) in enumerate(workload(requests, max_tokens)):
            ledger.accept(AddRequest(f"r{i}", prompt, spec))
        ledger.admit(engine)
        step = 0
        while engine.has_unfinished():
            result: StepResult = engine.step()
            step += 1
            held.append(len(ledger.active()))
            start = time.perf_counter_ns()
            now = clock() - started
            ledger.apply(result, now)
            snapshot = StepSnapshot(
                step=step,
                clock=now,
                engine_state=EngineState.RUNNING,
                counters=result.counters,
                active=ledger.active(),
                finished=ledger.finished(),
                budget=result.budget,
                queue_reasons=result.queue_reasons,
            )
            insight.observe(snapshot)
            encoder.encode(snapshot)
            ledger.take_finished()
            per_step["driver"].append(time.perf_counter_ns() - start)
            start = time.perf_counter_ns()
            for facts in subscriber.poll():
                watched.read(facts, time.time(), own={}, awaiting=set(), labelled=False)
            per_step["watch"].append(time.perf_counter_ns() - start)
            for name, samples in timed.items():  # what this step's engine call took, in all
                per_step[name].append(sum(samples[seen[name] :]))
                seen[name] = len(samples)
        stacks.close()  # before the second run: faulthandler has one watchdog per process
        ends = {  # before the attach run adds its own ends
            "logged": len(end_log),
            "log_bytes": end_log.bytes,
            "log_footprint": end_log.footprint(),
            "log_add_us": _mean_us(logs),
        }
        CoreCapture.capture = capture_record  # type: ignore[method-assign]
        attach = attach_figures(engine, publisher, address, requests, max_tokens)
        arming[0] = True
        before = len(steps)
        for i, (prompt, spec) in enumerate(workload(ARMED_REQUESTS, max_tokens)):
            ledger.accept(AddRequest(f"armed{i}", prompt, spec))
        ledger.admit(engine)
        while engine.has_unfinished():
            engine.step()
        arming[0] = False
    finally:
        stacks.close()
        watchdog_file.close()
        engine.shutdown()
        subscriber.close()
        publisher.close()
        watched.subscriber.close()
    # The steps with the queue still long: at least half the requests held, but the first,
    # whose record lists every request (what a new subscriber gets once).
    long = [i for i, count in enumerate(held) if count * 2 >= requests] or list(range(len(held)))
    first, last = min(long[0] + 1, long[-1]), long[-1] + 1
    return {
        "requests": requests,
        "steps": len(held),
        "measured_steps": last - first,
        "full_record_ms": sum(per_step[f][0] for f in ("capture", "publish", "watch")) / 1e6,
        **ends,
        **attach,
        **{name: _mean_us(samples[first:last]) for name, samples in per_step.items()},
        # The watch works per wake, not per step: its CPU over the whole run, per step.
        "stacks": stacks.work_ns / 1000 / max(1, len(held)),
        "stacks_wakes": stacks.wakes,
        "stacks_wake_us": stacks.work_ns / 1000 / max(1, stacks.wakes),
        "armed": _mean_us(pairs[1:]),
        "armed_step": _mean_us(steps[before + 1 :]),
    }


def _child(requests: int, max_tokens: int) -> dict[str, Any]:
    """One size in a fresh process (one engine per process; memory and caches start fresh)."""
    env = child_env({**os.environ, **BENCH_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"})
    done = subprocess.run(
        module_command(
            "benchmarks.capture_cost", "--one", str(requests), "--max-tokens", str(max_tokens)
        ),
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=1800,
    )
    if done.returncode != 0:
        raise SystemExit(f"capture_cost: {requests} requests failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def report(rows: list[dict[str, Any]], out: Callable[[str], None]) -> None:
    out(
        f"capture_cost: per engine-core step, over the steps holding at least half the "
        f"requests (max_num_seqs {MAX_NUM_SEQS}), {os.cpu_count()} CPUs"
    )
    out(f"{'requests':>9} {'step us':>9}  " + "  ".join(f"{f + ' us':>10}" for f in FIGURES))
    for row in rows:
        figures = "  ".join(f"{row[f]:>6.1f} ({row[f] / row['step']:.1%})" for f in FIGURES)
        out(f"{row['requests']:>9} {row['step']:>9.0f}  {figures}")
    full = ", ".join(f"{row['requests']}: {row['full_record_ms']:.1f} ms" for row in rows)
    out(
        "the first, full record (capture + publish + watch, stepview's own engine's, whole; "
        f"a watch's comes in parts, below): {full}"
    )
    hung = ", ".join(
        f"{row['requests']}: {row['stacks']:.2f} us ({row['stacks_wakes']} wakes of "
        f"{row['stacks_wake_us']:.0f} us) against {row['armed']:.1f} us "
        f"(capture {row['capture']:.1f} us; steps of {row['armed_step']:.0f} us)"
        for row in rows
    )
    out(
        "a hung step's stacks, per step: the plug-in's stack watch against faulthandler's "
        f"watchdog armed around each step (a second run, {ARMED_REQUESTS} requests): {hung}"
    )
    ends = ", ".join(
        f"{row['requests']}: {row['logged']} ends, {row['log_add_us']:.1f} us each, "
        f"{row['log_bytes'] / max(1, row['logged']):.0f} B encoded and "
        f"{row['log_footprint'] / max(1, row['logged']):.0f} B held each"
        for row in rows
    )
    out(f"the log of ends: {ends}")
    out(attach_line(rows))
    shares = " ".join(
        f"{f}=" + ",".join(f"{row[f] / row['step']:.2%}" for row in rows) for f in FIGURES
    )
    out(f"share of a step: {shares}")
    out(
        "scaling: "
        + " ".join(f"{f}_us=" + ",".join(f"{row[f]:.0f}" for row in rows) for f in FIGURES)
        + " attach_ms="
        + ",".join(f"{row['attach_ms']:.2f}" for row in rows)
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--requests",
        default=",".join(map(str, SIZES)),
        help="requests held, comma-separated (default 64,512,2048,8192)",
    )
    parser.add_argument("--max-tokens", type=int, default=16, help="max_tokens (default 16)")
    parser.add_argument("--quick", action="store_true", help="smoke test: 16 requests only")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child's one size
    args = parser.parse_args(argv)
    for name, value in BENCH_ENV.items():
        os.environ.setdefault(name, value)
    if args.one is not None:
        print(json.dumps(measure(args.one, args.max_tokens)))
        return 0
    sizes = [16] if args.quick else [int(s) for s in args.requests.split(",")]
    rows = [_child(size, args.max_tokens) for size in sizes]
    report(rows, print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
