"""Soak: an attached headless watch fed a million requests, and its memory as they pass.

``stepview --attach ADDRESS --headless --json`` is what a team leaves running beside a
server for weeks; its memory must follow its configuration (``--keep-finished``, the
sketch, the bounded alerts and timelines), never how many requests it has seen. Here a
synthetic engine core publishes, with the plug-in's own publisher and wire format
(:mod:`stepview.engine.plugin.publisher`, records of change, a full record to every new
subscriber; the core is :mod:`benchmarks.synthetic_core`), requests of realistic size:
prompts and completions of 100 to 300 tokens, 256 running at a time, 1 in 40 preempted once
and recomputed, a queue that never empties.
Each step gives every running request up to ``--tokens-per-step`` tokens (8: as speculative
decoding would), which changes how many steps a million requests take, not what the watch
keeps. It publishes as fast as the watch takes them: never more than ``LEAD`` requests
ahead of what the watch has printed (a record dropped past zmq's high-water mark would only
make the watch resynchronise, as it does with a real server).

The watch's RSS (psutil) is printed when it has printed 1 %, 10 % and all of the requests;
the last line is ``watch_memory: rss_mb_10k=A rss_mb_100k=B rss_mb_1m=C`` for the default
million (labels follow ``--requests``; ``--quick``: 500, a smoke test). Every request
must be in the watch's results file, and the watch must exit 0 on Ctrl+C. Target (issue 18):
C <= 400 MB and C <= 1.10 x B. The results file (3 KB a request) goes to a temporary folder,
removed at the end.
"""

from __future__ import annotations

import argparse
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
from benchmarks.synthetic_core import SyntheticCore
from stepview.engine.plugin.publisher import FactsPublisher

LEAD = 2000  # requests published ahead of what the watch has printed, at most


class Printed:
    """How many lines (finished requests) the watch has printed, counted on a thread."""

    def __init__(self, stream: object) -> None:
        self.count = 0
        self._stream = stream
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for _ in self._stream:  # type: ignore[attr-defined]
            self.count += 1


def label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def rss_mb(process: psutil.Process) -> float:
    return float(process.memory_info().rss) / 2**20


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--tokens-per-step", type=int, default=8)
    # 500: still more than the 256 running, so a queue waits behind a full batch, in ~2 s.
    parser.add_argument("--quick", action="store_true", help="500 requests: a smoke test")
    args = parser.parse_args(argv)
    total = 500 if args.quick else args.requests
    marks = [total // 100, total // 10, total]
    with tempfile.TemporaryDirectory(prefix="stepview-soak-") as tmp:
        folder = Path(tmp)
        address = f"ipc://{folder / 'facts.sock'}"
        publisher = FactsPublisher(address)
        command = [
            *(sys.executable, "-m", "stepview", "--attach", address, "--headless", "--json"),
            *("--results", str(folder / "results.jsonl"), "--log-file", str(folder / "log")),
        ]
        watch = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
            preexec_fn=sigint_as_a_user_has_it,
        )
        process = psutil.Process(watch.pid)
        printed = Printed(watch.stdout)
        try:
            while not publisher.wanted():
                if watch.poll() is not None:
                    raise SystemExit(f"the watch exited ({watch.returncode}); log: {folder}/log")
                time.sleep(0.01)
            core = SyntheticCore(total, args.tokens_per_step)
            figures: dict[int, float] = {}
            began = time.monotonic()
            last_report = began
            while marks[len(figures) :]:
                mark = marks[len(figures)]
                if printed.count >= mark:
                    figures[mark] = rss_mb(process)
                    took = time.monotonic() - began
                    print(
                        f"{printed.count:>9} requests  rss {figures[mark]:7.1f} MB  {took:7.0f} s"
                    )
                    continue
                if watch.poll() is not None:
                    raise SystemExit(f"the watch exited ({watch.returncode}) at {printed.count}")
                if core.finished - printed.count > LEAD or core.finished >= total:
                    time.sleep(0.002)
                    continue
                publisher.wanted()  # reads (re)subscriptions: a resync asks for a full record
                full, publisher.fresh = publisher.fresh or core.seq == 0, False
                publisher.deliver(core.next_record(full))
                now = time.monotonic()
                if now - last_report > 30:
                    last_report = now
                    rate = printed.count / (now - began)
                    print(
                        f"  ... {printed.count} requests, {rate:.0f}/s, "
                        f"rss {rss_mb(process):.1f} MB"
                    )
            watch.send_signal(signal.SIGINT)
            code = watch.wait(60)
            with (folder / "results.jsonl").open("rb") as results:
                saved = sum(1 for _ in results)
            print(f"exit code {code}; {saved} requests in the results file")
        finally:
            if watch.poll() is None:
                watch.kill()
                watch.wait(10)
            publisher.close()
    if code != 0 or saved != total:
        raise SystemExit(f"the watch exited with {code}, {saved} of {total} requests saved")
    a, b, c = (figures[m] for m in marks)
    print(
        f"watch_memory: rss_mb_{label(marks[0])}={a:.1f} rss_mb_{label(marks[1])}={b:.1f} "
        f"rss_mb_{label(marks[2])}={c:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
