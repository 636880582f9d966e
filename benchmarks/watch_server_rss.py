"""An attached headless watch beside a real API server under a steady load: its memory by minute.

What a team leaves running: ``stepview --attach ADDRESS --headless`` with a results file, the
flight recorder, the stuck watchdog and the metrics endpoint, beside vLLM's OpenAI server
(demo model, CPU, stepview's plug-in) that a few clients keep busy. Every minute the watch's
RSS (psutil) and the requests finished so far are printed; at the end a ``SIGUSR1`` must
write a flight recording and Ctrl+C must end the watch with exit 0.

The watch runs niced beside a server that keeps every core busy, so it falls behind and
records are dropped for it: what it missed it catches up from the plug-in's log of ends.
Once the clients stop (and the requests in flight are answered), the results file must hold
every request the clients completed; ``results`` and ``unseen`` (what the watch counted as
lost) say whether it does, ``caught_up`` how many times the watch asked the log. Where this
machine does not starve the watch, ``--starve S`` does: the watch is stopped for S seconds
in every minute (past 3 s its link drops too).

Last line: ``watch_server_rss: minutes=M requests=N results=R unseen=U caught_up=C
rss_mb_first=A rss_mb_last=B rss_mb_max=C flight=ok|missing``. ``--minutes 30`` is the
issue's run (default); ``--quick``: one quarter of a minute (``minutes=0.25``), for a smoke
test. Run it alone (``flock /tmp/stepview-engine.lock``): the server, the clients and the
watch share the machine. ``--server URL --publish ADDRESS`` watches a server already running
(:mod:`benchmarks.given_server`) instead of starting one: the smoke test runs so on the test
suite's shared plug-in server, which is real vLLM, so ``results`` and ``unseen`` there are
still a real server's.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

from benchmarks.children import sigint_as_a_user_has_it
from benchmarks.given_server import add_server_flags, plugged
from stepview.testing.vllm_server import ApiServer, complete, free_port, server_command, server_env

CLIENTS = 3
QUICK_MINUTE_S = 15
"""``--quick``'s "minute": long enough for the clients to finish requests beside the watch,
short enough for a smoke test, which checks the watch's files and the last line, not its
memory over time."""
PROMPTS = ["The ship sailed at dawn", "Write a list of ten colours", "Tell me about the sea"]


def clients(port: int, stop: threading.Event, done: list[int]) -> list[threading.Thread]:
    """``CLIENTS`` threads sending completions one after another until ``stop``."""

    def client(n: int) -> None:
        i = 0
        while not stop.is_set():
            try:
                complete(port, f"{PROMPTS[(n + i) % len(PROMPTS)]} {i}", 24 + (i * 7) % 40)
                done[n] += 1
            except OSError:
                if not stop.is_set():
                    time.sleep(1)  # the server busy or restarting: try again
            i += 1

    return [threading.Thread(target=client, args=(n,), daemon=True) for n in range(CLIENTS)]


def settle(results: Path, done: list[int], threads: list[threading.Thread]) -> None:
    """After the clients stop: their last requests answered, then until the results file
    holds as many requests as they completed (a few minutes at most: the idle engine core
    answers the watch's questions from the plug-in's own thread)."""
    for thread in threads:
        thread.join(120)
    deadline = time.monotonic() + 300
    while _lines(results) < sum(done) and time.monotonic() < deadline:
        time.sleep(1)  # polling a file another process writes


def _lines(path: Path) -> int:
    return sum(1 for _ in path.open()) if path.exists() else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument(
        "--quick", action="store_true", help=f"one 'minute' of {QUICK_MINUTE_S} s: a smoke test"
    )
    parser.add_argument(
        "--starve",
        type=float,
        default=0.0,
        help="stop the watch (SIGSTOP) for this many seconds in every minute: starved on "
        "purpose where the machine does not starve it (default 0)",
    )
    add_server_flags(parser)
    args = parser.parse_args(argv)
    minutes, minute_s = (1, QUICK_MINUTE_S) if args.quick else (args.minutes, 60)
    work = Path(tempfile.mkdtemp(prefix="stepview-rss-"))
    given = plugged(args)
    server: ApiServer
    if given is not None:
        server, publish = given, given.publish or ""
        print(f"watching the server given at port {server.port}", flush=True)
    else:
        from stepview.engine.own.tiny_model import ensure_tiny_model

        port, publish = free_port(), f"ipc://{work}/facts.sock"
        command = server_command(ensure_tiny_model(), port)
        server = ApiServer(command, server_env(publish), port, work / "server.log")
        print(f"starting the API server (log: {work / 'server.log'})", flush=True)
    port = server.port
    server.start()
    flight = work / "flight"
    watch_args = [sys.executable, "-m", "stepview", "--attach", publish, "--headless", "--json"]
    watch_args += ["--api", f"http://127.0.0.1:{port}", "--results", str(work / "results.jsonl")]
    watch_args += ["--flight-recorder", "2m", "--flight-dir", str(flight)]
    watch_args += ["--stuck-after", "300", "--metrics-port", "0", "--log-file", str(work / "log")]
    stderr = (work / "watch.err").open("w")
    watch = subprocess.Popen(
        watch_args,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        preexec_fn=sigint_as_a_user_has_it,
    )
    stop, done = threading.Event(), [0] * CLIENTS
    rss: list[float] = []
    try:
        time.sleep(5)  # the watch connects (a fixed wait is fine here: nothing is asserted on it)
        threads = clients(port, stop, done)
        for thread in threads:
            thread.start()
        process = psutil.Process(watch.pid)
        started = time.monotonic()
        for minute in range(minutes + 1):
            if minute and args.starve:  # the minute starts with the watch stopped
                watch.send_signal(signal.SIGSTOP)
                time.sleep(args.starve)  # (the starving is the point: nothing to wait on)
                watch.send_signal(signal.SIGCONT)
            while minute and time.monotonic() < started + minute_s * minute:
                if watch.poll() is not None:  # a watch that died has no memory to sample
                    tail = (work / "watch.err").read_text().splitlines()[-3:]
                    raise SystemExit(
                        f"the watch exited ({watch.returncode}) at minute {minute}: {tail}"
                    )
                time.sleep(1)
            rss.append(process.memory_info().rss / (1 << 20))
            print(
                f"minute {minute * minute_s / 60:3g}: watch rss {rss[-1]:6.1f} MB, "
                f"{sum(done)} requests",
                flush=True,
            )
        stop.set()
        print("clients stopped; waiting for the watch's results file", flush=True)
        settle(work / "results.jsonl", done, threads)
        watch.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 30
        while not any(flight.glob("flight-*.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.2)
        recorded = any(flight.glob("flight-*.jsonl"))
    finally:
        stop.set()
        watch.send_signal(signal.SIGINT)
        code = watch.wait(60)
        stderr.close()
        server.kill()
    results = _lines(work / "results.jsonl")
    print(f"watch exit code {code}; {results} requests in its results file; files in {work}")
    err = (work / "watch.err").read_text()
    told = [int(n) for n in re.findall(r"\((\d+) so far; stepview_requests_unseen", err)]
    unseen = max(told, default=0)
    logged = (work / "log").read_text().splitlines() if (work / "log").exists() else []
    caught = len({line for line in logged if "caught up on records" in line})
    for line in (work / "watch.err").read_text().splitlines()[-4:]:
        print(f"  watch: {line}")
    if recorded:
        header = json.loads(next(flight.glob("flight-*.jsonl")).open().readline())
        print(f"  flight recording: {header['flight']['why']}, {header['flight']['held']} s held")
    print(
        f"watch_server_rss: minutes={minutes * minute_s / 60:g} requests={sum(done)} "
        f"results={results} unseen={unseen} caught_up={caught} rss_mb_first={rss[0]:.1f} "
        f"rss_mb_last={rss[-1]:.1f} rss_mb_max={max(rss):.1f} "
        f"flight={'ok' if recorded else 'missing'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
