"""How long an event takes from the engine's step to a reader of ``--events``, beside a busy server.

A real vLLM API server with stepview's plug-in (the demo model, CPU) serves a steady load
(``--clients`` threads each sending one greedy ``ignore_eos`` completion of ``--max-tokens``
after another), watched by ``stepview --attach ADDRESS --headless --events
http://127.0.0.1:0``. An httpx reader follows the stream and, for every event, takes its read
time (``time.time()``) less the event's ``engine_time`` (the wall clock of the engine step that
caused it, as the plug-in's record dates it): the delay from the engine's step to a program
that acts on it. The server and the watch run on the same machine, so both clocks are one.

Beside it, for the same change, vLLM's own ``/metrics``: a poller asks the server's page every
``--poll-ms`` (far more often than any Prometheus scrapes) for
``vllm:request_success_total``; the k-th request to finish is the k-th ``finished`` event, and
its delay on ``/metrics`` is the first poll that counts k less that event's ``engine_time``.
A Prometheus scraping every 15 s adds 7.5 s on average to that.

The last line is ``event_delay: events=N p50_ms=A p99_ms=B finished_p50_ms=C
finished_p99_ms=D metrics_p50_ms=E metrics_p99_ms=F``. Run it alone on the machine (``flock
/tmp/stepview-heavy.lock python -m benchmarks event_delay``): a server start takes ~30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import httpx

from stepview.testing.vllm_server import (
    ROOT,
    ApiServer,
    complete,
    free_port,
    server_command,
    server_env,
)


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _successes(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
        text = page.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:request_success_total")
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="length of the load")
    parser.add_argument("--clients", type=int, default=8, help="client threads of the load")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--poll-ms", type=float, default=10.0, help="/metrics poll period")
    parser.add_argument(
        "--publish-every-ms",
        type=float,
        default=None,
        help="the server's STEPVIEW_PUBLISH_EVERY_MS (default: the plug-in's, 50 ms of "
        "records sent together)",
    )
    args = parser.parse_args(argv)
    from stepview.engine.own.tiny_model import ensure_tiny_model

    folder = Path(tempfile.mkdtemp(prefix="stepview-event-delay-"))
    port, publish = free_port(), f"tcp://127.0.0.1:{free_port()}"
    env = server_env(publish)
    if args.publish_every_ms is not None:
        env["STEPVIEW_PUBLISH_EVERY_MS"] = str(args.publish_every_ms)
    server = ApiServer(server_command(ensure_tiny_model(), port), env, port, folder / "s.log")
    server.start()
    watch: subprocess.Popen[str] | None = None
    try:
        complete(port, "warm up", 4)
        baseline = _successes(port)
        watch = subprocess.Popen(
            [
                *(sys.executable, "-m", "stepview", "--attach", publish, "--headless"),
                *("--events", "http://127.0.0.1:0", "--log-file", str(folder / "stepview.log")),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert watch.stderr is not None
        url = ""
        while not url:
            line = watch.stderr.readline()
            if not line:
                raise RuntimeError("stepview ended before serving its events")
            if "serving events at" in line:
                url = line.rsplit(" ", 1)[1].strip()
        delays: list[float] = []
        finished_at: list[float] = []  # engine_time of each finished event, in order
        finished_delays: list[float] = []
        stop = threading.Event()

        def read() -> None:
            with httpx.stream("GET", url, timeout=None) as response:
                for text in response.iter_lines():
                    if not text.startswith("data: "):
                        continue
                    now = time.time()
                    event = json.loads(text[6:])
                    engine_time = event.get("engine_time")
                    if engine_time is not None:
                        delays.append(now - engine_time)
                        if event["event"] == "finished":
                            finished_at.append(engine_time)
                            finished_delays.append(now - engine_time)
                    if stop.is_set():
                        return

        seen_at: list[float] = []  # when /metrics first counted k more successes

        def poll() -> None:
            while not stop.is_set():
                count = int(_successes(port) - baseline)
                now = time.time()
                while len(seen_at) < count:
                    seen_at.append(now)
                stop.wait(args.poll_ms / 1000)

        def load() -> None:
            i = 0
            while not stop.is_set():
                prompt = f"Load {threading.get_ident()} {i}:"
                complete(port, prompt, args.max_tokens, ignore_eos=True)
                i += 1

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(1.0)  # the reader connected before the load (a benchmark, not a test)
        threads = [threading.Thread(target=poll, daemon=True)]
        threads += [threading.Thread(target=load, daemon=True) for _ in range(args.clients)]
        for thread in threads:
            thread.start()
        time.sleep(args.seconds)
        stop.set()
        for thread in threads:
            thread.join(60)
        time.sleep(1.0)  # the last events of the load reach the reader
        pairs = [seen - done for seen, done in zip(seen_at, finished_at, strict=False)]
        ms = 1000.0
        print(f"events read: {len(delays)}; finished: {len(finished_at)}; matched: {len(pairs)}")
        print(
            f"event_delay: events={len(delays)} p50_ms={_percentile(delays, 0.5) * ms:.1f} "
            f"p99_ms={_percentile(delays, 0.99) * ms:.1f} "
            f"finished_p50_ms={_percentile(finished_delays, 0.5) * ms:.1f} "
            f"finished_p99_ms={_percentile(finished_delays, 0.99) * ms:.1f} "
            f"metrics_p50_ms={_percentile(pairs, 0.5) * ms:.1f} "
            f"metrics_p99_ms={_percentile(pairs, 0.99) * ms:.1f}"
        )
    finally:
        if watch is not None and watch.poll() is None:
            watch.terminate()
            watch.wait(60)
        server.kill()
    return 0
