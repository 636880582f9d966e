"""What the scheduler plug-in costs inside vLLM's engine core, per step.

Runs ``engine_overhead``'s 64-request workload on the demo model with the engine core in this
process (the plug-in's code is the same in a core process; only here can one process time
both), and times with ``time.perf_counter_ns``:

* ``capture``: building the step's record (:meth:`CoreCapture.capture`), in every step;
* ``publish``: what a core process adds on top: encoding the record and the non-blocking zmq
  send (:meth:`FactsPublisher.deliver`, to a subscriber on an ipc socket, as stepview's own
  engine does with multiprocessing on); ``encode`` is the msgpack part of it;
* ``nobody subscribed``: what a server with the plug-in and no stepview attached pays per step
  (:meth:`FactsPublisher.wanted` on a publisher nobody subscribed to);
* ``view``: stepview's side, turning the record into the driver's entries (in stepview's
  process, not the engine core's);

each against the engine core's own step (``EngineCore.step``: schedule, model, update).

Usage: ``python benchmarks/capture_cost.py [--rounds 3] [--requests 64] [--max-tokens 64]``
(``--quick``: one small round, for a smoke test);
run it under the engine lock on a shared machine (``flock /tmp/stepview-engine.lock ...``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.engine_overhead import BENCH_ENV, workload


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


def _per_step(samples: Sequence[int]) -> tuple[float, float]:
    """Mean and median of samples in ns, as microseconds."""
    if not samples:
        return 0.0, 0.0
    return statistics.fmean(samples) / 1000, statistics.median(samples) / 1000


def _unsubscribed_check_ns(calls: int = 200_000) -> float:
    """ns per ``wanted()`` on a publisher nobody subscribes to (one per engine step)."""
    from stepview.engine.plugin.publisher import FactsPublisher

    with tempfile.TemporaryDirectory() as folder:
        publisher = FactsPublisher(f"ipc://{folder}/idle.sock")
        try:
            start = time.perf_counter_ns()
            for _ in range(calls):
                publisher.wanted()
            return (time.perf_counter_ns() - start) / calls
        finally:
            publisher.close()


def measure(rounds: int, requests: int, max_tokens: int, out: Callable[[str], None]) -> None:
    from stepview.engine.own.environment import prepare_vllm_environment

    workdir = Path(tempfile.mkdtemp(prefix="stepview-capture-"))
    prepare_vllm_environment(workdir / "vllm.log")
    from vllm.v1.engine.core import EngineCore

    from stepview.engine.own.tiny_model import DEMO_MODEL_NAME, demo_engine_args
    from stepview.engine.own.vllm_engine import VllmEngine
    from stepview.engine.plugin.capture import CoreCapture
    from stepview.engine.plugin.publisher import FactsPublisher
    from stepview.engine.records import channel as facts_channel
    from stepview.engine.records.channel import FactsSubscriber
    from stepview.engine.records.entries import SchedulerView

    steps: list[int] = []
    captures: list[int] = []
    publishes: list[int] = []
    views: list[int] = []
    encodes: list[int] = []
    _timed(EngineCore, "step", steps)
    _timed(CoreCapture, "capture", captures)
    _timed(FactsPublisher, "deliver", publishes)
    _timed(SchedulerView, "read", views)
    _timed(facts_channel, "encode_facts_into", encodes)

    engine = VllmEngine.create(
        demo_engine_args(), demo_model=True, model_label=DEMO_MODEL_NAME, multiprocess=False
    )
    address = f"ipc://{workdir}/facts.sock"
    publisher = FactsPublisher(address)
    subscriber = FactsSubscriber(address)
    received = 0
    try:
        if not subscriber.wait_connected(10):
            raise SystemExit("capture_cost: the subscriber did not connect")
        # The in-process record also goes out as a core process would publish it.
        capture_record = CoreCapture.capture

        def capture_and_publish(self: CoreCapture, *args: Any) -> Any:
            facts = capture_record(self, *args)
            publisher.deliver(facts)
            return facts

        CoreCapture.capture = capture_and_publish  # type: ignore[method-assign]
        for round_no in range(rounds):
            batch = workload(requests, max_tokens, seed=1234 + round_no)
            for i, (prompt, spec) in enumerate(batch):
                engine.add_request(f"r{round_no}-{i}", prompt, spec)
            while engine.has_unfinished():
                engine.step()
                received += len(subscriber.poll())
    finally:
        engine.shutdown()
        subscriber.close()
        publisher.close()

    step_mean, step_median = _per_step(steps)
    out(
        f"capture_cost: {requests} requests x {max_tokens} tokens, {rounds} round(s), "
        f"{len(steps)} engine-core steps, {len(captures)} records ({received} received over "
        f"ipc), {os.cpu_count()} CPUs"
    )
    out(f"engine-core step: mean {step_mean:.0f} us, median {step_median:.0f} us")
    unsubscribed = _unsubscribed_check_ns()
    for label, samples in (("publish", publishes), ("  encode", encodes), ("view", views)):
        mean, median = _per_step(samples)
        out(f"{label}: {mean:.1f} us/step (median {median:.1f}) = {mean / step_mean:.2%}")
    out(
        f"nobody subscribed: {unsubscribed:.0f} ns/step = {unsubscribed / 1000 / step_mean:.3%} "
        f"of a step"
    )
    mean, median = _per_step(captures)
    out(f"capture: {mean:.1f} us/step = {mean / step_mean:.2%} of a step (median {median:.1f} us)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="workload runs (default 3)")
    parser.add_argument("--requests", type=int, default=64, help="requests per run (default 64)")
    parser.add_argument("--max-tokens", type=int, default=64, help="max_tokens (default 64)")
    parser.add_argument(
        "--quick", action="store_true", help="CI smoke: 1 round of 16 requests x 16 tokens"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.requests, args.max_tokens = 1, 16, 16
    for name, value in BENCH_ENV.items():
        os.environ.setdefault(name, value)
    measure(args.rounds, args.requests, args.max_tokens, print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
