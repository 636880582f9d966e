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

The server is started as docs/events.md tells event consumers to start theirs: with
``STEPVIEW_PUBLISH_EVERY_MS=10`` (``--publish-every-ms``; the plug-in's default of 50 ms of
records sent together is for a person watching, and adds up to 50 ms to every event).

Then, the load still running, what a reader that reads nothing costs the server: its
throughput (requests the load completed) in ``--window``-second windows with such a reader
connected against without, ``--pairs`` pairs in alternating order, the median of the
per-pair ratios.

The last line is ``event_delay: events=N p50_ms=A p99_ms=B finished_p50_ms=C
finished_p99_ms=D metrics_p50_ms=E metrics_p99_ms=F silent_reader_throughput=R``. Run it
alone on the machine (``flock /tmp/stepview-heavy.lock python -m benchmarks event_delay``):
a server start takes ~30 s, the whole ~3 min.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import psutil

from stepview.testing.vllm_server import (
    ROOT,
    ApiServer,
    complete,
    free_port,
    server_command,
    server_env,
)

# What docs/events.md tells event consumers to start their servers with (see the docstring).
CONSUMER_PUBLISH_EVERY_MS = 10.0


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


@contextlib.contextmanager
def _silent_reader(url: str) -> Iterator[None]:
    """A reader of ``url`` that asks for the stream and then reads nothing (its queue fills
    on stepview's side, then the kernel's buffers)."""
    where = urllib.parse.urlsplit(url)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(f"GET {where.path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        yield


def _silent_reader_pairs(
    url: str, done: list[int], pairs: int, window: float, watch: psutil.Process
) -> tuple[list[float], list[float]]:
    """The load's throughput with a silent reader connected over that without, per pair of
    ``window``-second windows, the order alternating (ABBA: a drift of the shared machine
    falls on both sides alike); and the same ratio of the watch's CPU time (the server's
    throughput is noisy here: what stepview itself spends says whether it could be the
    cause)."""
    ratios, cpu_ratios = [], []
    for i in range(pairs):
        counts, cpu = {}, {}
        for silent in (False, True) if i % 2 == 0 else (True, False):
            with _silent_reader(url) if silent else contextlib.nullcontext():
                start, began = done[0], _cpu_s(watch)
                time.sleep(window)
                counts[silent], cpu[silent] = done[0] - start, _cpu_s(watch) - began
        ratios.append(counts[True] / counts[False] if counts[False] else float("nan"))
        cpu_ratios.append(cpu[True] / cpu[False] if cpu[False] else float("nan"))
    return ratios, cpu_ratios


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="length of the load")
    parser.add_argument("--clients", type=int, default=8, help="client threads of the load")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--poll-ms", type=float, default=10.0, help="/metrics poll period")
    parser.add_argument(
        "--publish-every-ms",
        type=float,
        default=CONSUMER_PUBLISH_EVERY_MS,
        help="the server's STEPVIEW_PUBLISH_EVERY_MS (the plug-in's own default: 50)",
    )
    parser.add_argument(
        "--pairs", type=int, default=6, help="pairs of windows with and without a silent reader"
    )
    parser.add_argument("--window", type=float, default=6.0, help="seconds of each window")
    args = parser.parse_args(argv)
    from stepview.engine.own.tiny_model import ensure_tiny_model

    folder = Path(tempfile.mkdtemp(prefix="stepview-event-delay-"))
    port, publish = free_port(), f"tcp://127.0.0.1:{free_port()}"
    env = server_env(publish)
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

        done = [0]  # requests the load completed: its throughput, for the pairs below

        def load() -> None:
            i = 0
            while not stop.is_set():
                prompt = f"Load {threading.get_ident()} {i}:"
                complete(port, prompt, args.max_tokens, ignore_eos=True)
                done[0] += 1  # one thread at a time adds (the GIL); a lost count is no bias
                i += 1

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(1.0)  # the reader connected before the load (a benchmark, not a test)
        threads = [threading.Thread(target=poll, daemon=True)]
        threads += [threading.Thread(target=load, daemon=True) for _ in range(args.clients)]
        for thread in threads:
            thread.start()
        time.sleep(args.seconds)
        # The delays are those of the load alone; the pairs' (a silent reader half the
        # time) are printed apart.
        measured, measured_finished = len(delays), len(finished_delays)
        ratios, cpu_ratios = _silent_reader_pairs(
            url, done, args.pairs, args.window, psutil.Process(watch.pid)
        )
        stop.set()
        for thread in threads:
            thread.join(60)
        time.sleep(1.0)  # the last events of the load reach the reader
        during_pairs = delays[measured:]
        del delays[measured:], finished_delays[measured_finished:], finished_at[measured_finished:]
        pairs = [seen - made for seen, made in zip(seen_at, finished_at, strict=False)]
        ms = 1000.0
        silent = statistics.median(ratios) if ratios else float("nan")
        print(f"events read: {len(delays)}; finished: {len(finished_at)}; matched: {len(pairs)}")
        print(
            f"while the pairs ran: events={len(during_pairs)} "
            f"p50_ms={_percentile(during_pairs, 0.5) * 1000:.1f} "
            f"p99_ms={_percentile(during_pairs, 0.99) * 1000:.1f}"
        )
        print(
            "server throughput with a reader that reads nothing / without, per pair: "
            + " ".join(f"{ratio:.3f}" for ratio in ratios)
        )
        print(
            "the watch's CPU time with a reader that reads nothing / without, per pair: "
            + " ".join(f"{ratio:.3f}" for ratio in cpu_ratios)
            + f" (median {statistics.median(cpu_ratios):.3f})"
        )
        print(
            f"event_delay: events={len(delays)} p50_ms={_percentile(delays, 0.5) * ms:.1f} "
            f"p99_ms={_percentile(delays, 0.99) * ms:.1f} "
            f"finished_p50_ms={_percentile(finished_delays, 0.5) * ms:.1f} "
            f"finished_p99_ms={_percentile(finished_delays, 0.99) * ms:.1f} "
            f"metrics_p50_ms={_percentile(pairs, 0.5) * ms:.1f} "
            f"metrics_p99_ms={_percentile(pairs, 0.99) * ms:.1f} "
            f"silent_reader_throughput={silent:.3f}"
        )
    finally:
        if watch is not None and watch.poll() is None:
            watch.terminate()
            watch.wait(60)
        server.kill()
    return 0
