"""What the flight recorder holds per minute, and what it costs per step, by batch size.

``--flight-recorder DURATION`` keeps the last DURATION of encoded steps in memory, bounded by
``--flight-max-mb``; which bound wins depends on how many bytes a minute of steps takes. That
depends on what a step changes: every running request gains a token (a few dozen bytes of
delta each), so it grows with the batch. This runs the driver on the fake engine (vLLM's
scheduling, no model: the trace is the same whatever produces the tokens) with 64 and with
1 000 requests decoding at once and a queue behind them, feeds every snapshot to a
:class:`~stepview.trace.flight.FlightRecorder`, and prints per batch size:

* bytes per step in the ring (segments' standalone steps included);
* encoding time per step (``time.perf_counter_ns``, the recorder's ``on_snapshot``);
* MB per minute at 20 steps/s (a decode step of ~50 ms; scale linearly for another rate),
  and the minutes the default 256 MB bound then holds.

Last line: ``flight_size: mb_per_min_64=A mb_per_min_1000=B us_per_step_64=C
us_per_step_1000=D`` (``--quick``: small sizes, for a smoke test).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from stepview.engine.driver.loop import Driver
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import StepSnapshot
from stepview.outputs.watching import FLIGHT_MAX_MB
from stepview.testing.fake_engine import FakeEngine, ManualClock
from stepview.trace.flight import FlightRecorder

STEPS_PER_S = 20.0
PROMPT = "a prompt of about forty tokens, as a chat turn with a system prompt is " * 2


def measure(batch: int, steps: int, folder: Path) -> tuple[float, float]:
    """Bytes and microseconds per step with ``batch`` requests decoding."""
    engine = FakeEngine(
        max_num_seqs=batch,
        max_num_batched_tokens=max(2048, batch * 4),
        num_kv_blocks=batch * 64,
        max_model_len=4096,
    )
    recorder = FlightRecorder(folder, 3600.0, 1 << 40)  # neither bound reached: all kept
    times: list[int] = []
    sizes: list[int] = []

    class Timed:
        """The recorder as the driver's sink, timed; the ring's size after each step."""

        error = None

        def on_snapshot(self, snapshot: StepSnapshot, finished: object) -> None:
            started = time.perf_counter_ns()
            recorder.on_snapshot(snapshot, ())
            times.append(time.perf_counter_ns() - started)
            sizes.append(recorder.held[1])

        def close(self) -> None:
            recorder.close()

    driver = Driver(
        lambda phase: engine, clock=ManualClock(tick=0.0001), sinks=[Timed()], history_size=1
    )
    driver.start()
    try:
        for i in range(batch + batch // 4):  # a queue behind the batch
            spec = SamplingSpec(max_tokens=steps + 50, ignore_eos=True, seed=i)
            driver.send(AddRequest(f"r{i}", PROMPT, spec))
        while len(times) < steps + 20 and driver.alive:
            time.sleep(0.05)
    finally:
        driver.stop()
    # Past the start-up and the first prefills: the steady decode a busy server runs.
    warm = 20
    per_step = (sizes[-1] - sizes[warm]) / (len(sizes) - 1 - warm)
    return per_step, statistics.median(times[warm:]) / 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    args = parser.parse_args(argv)
    sizes = (8, 16) if args.quick else (64, 1000)
    steps = 40 if args.quick else args.steps
    figures: dict[int, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for batch in sizes:
            per_step, us = measure(batch, steps, Path(folder))
            figures[batch] = (per_step, us)
            per_min = per_step * STEPS_PER_S * 60 / (1 << 20)
            holds = FLIGHT_MAX_MB / per_min if per_min else float("inf")
            print(
                f"{batch:5d} decoding: {per_step / 1024:7.1f} KB/step, {us:7.0f} us/step to "
                f"encode, {per_min:6.1f} MB/min at {STEPS_PER_S:.0f} steps/s: "
                f"{FLIGHT_MAX_MB} MB hold {holds:.1f} min",
                flush=True,
            )
    (small, big) = sizes
    mb = {b: figures[b][0] * STEPS_PER_S * 60 / (1 << 20) for b in sizes}
    print(
        f"flight_size: mb_per_min_{small}={mb[small]:.1f} mb_per_min_{big}={mb[big]:.1f} "
        f"us_per_step_{small}={figures[small][1]:.0f} us_per_step_{big}={figures[big][1]:.0f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
