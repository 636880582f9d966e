"""One stepview watching 64 simulated servers: its CPU per server and how far it falls behind.

A fleet is watched by one process, every server on a thread of its own
(:mod:`stepview.launch.fleet`): what it costs grows with the fleet, and a watch that cannot
keep up falls behind its plug-in servers. Here :mod:`benchmarks.fleet_servers` plays the fleet
in one process of its own: three servers in four with the plug-in (a synthetic engine core
behind the plug-in's own publisher: a few requests running, ``--steps-per-s`` steps a second,
records batched as a server sends them) and the rest unmodified, answering ``/metrics`` pages
with vLLM's metric names. One ``stepview --attach-file FILE --headless`` watches them all, as
a team leaves it running (its default ``--nice 10`` and ``--scrape-interval 1``).

Once every server has been reached (its line says it is up), for ``--seconds``: the watch's
CPU seconds (psutil: user and system, children included) per server per wall second, in
percent of one core; how far behind its plug-in servers its views are, as the watch itself
says in each line (``behind_s``: seconds between a record's time and its reading, beyond the
first record's, the figure behind the status bar's "view N s behind the server"), p50 and
max over every line of the window; how old each live row's figures were at each line (the
line's ``time`` less its ``read_at``, by kind: ``read_age_s_*`` on the ``fleet_scale rows:``
line); and its RSS at the end. The last line is ``fleet_scale:
servers=64 cpu_pct_per_server=X lag_s_p50=A lag_s_max=B rss_mb=R cpu_pct=C up=U``, where C
is the whole watch's share of one core and U how many servers its last lines showed up.
``--quick``: 4 servers for 8 s, a smoke test. Run it alone: the simulated fleet takes a core.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import psutil

from benchmarks.children import child_env, module_command, sigint_as_a_user_has_it

UP = frozenset({"running", "idle", "paused"})
REACH_TIMEOUT_S = 60.0


class Lines:
    """The watch's JSON lines, read on a thread: the latest per server, and every line."""

    def __init__(self, stream: IO[str]) -> None:
        self.latest: dict[str, dict[str, Any]] = {}
        self.every: list[dict[str, Any]] = []
        self._stream = stream
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self._stream:
            record = json.loads(line)
            self.latest[record["address"]] = record
            self.every.append(record)

    def up(self) -> int:
        return sum(1 for record in list(self.latest.values()) if record["state"] in UP)


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system + times.children_user + times.children_system)


STOP_WAIT_S = 120  # a niced watch beside a loaded machine (a test run) stops slowly


def stop(process: subprocess.Popen[str], sig: int = signal.SIGINT) -> int:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


class SimulatedFleet:
    """:mod:`benchmarks.fleet_servers` in a process of its own while in a ``with``: three
    servers in four with the plug-in, the rest ``/metrics`` pages, listed in :attr:`listing`
    (``dead`` of them down or hung: :attr:`live` the others);
    :attr:`stats` is its closing line (records published, pages scraped), once left;
    ``wrap``: a command it runs under (``taskset -c 0``)."""

    def __init__(
        self,
        servers: int,
        steps_per_s: float,
        folder: Path,
        wrap: Sequence[str] = (),
        dead: int = 0,
    ) -> None:
        plugins = servers * 3 // 4 if servers > 1 else 1
        self.listing = folder / "servers.txt"
        self.live = servers - dead
        self.stats: dict[str, Any] = {}
        simulate = module_command(
            "benchmarks.fleet_servers",
            *("--plugin", str(plugins), "--metrics", str(servers - plugins)),
            *("--file", str(self.listing), "--steps-per-s", str(steps_per_s)),
            *("--dead", str(dead)),
        )
        self._command = [*wrap, *simulate]

    def __enter__(self) -> SimulatedFleet:
        fleet = self._process = subprocess.Popen(
            self._command, env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert fleet.stdout is not None
        if fleet.stdout.readline().strip() != "ready":
            stop(fleet, signal.SIGTERM)
            raise SystemExit(f"the simulated fleet did not start ({fleet.wait()})")
        return self

    def __exit__(self, *exc: object) -> None:
        fleet = self._process
        assert fleet.stdin is not None and fleet.stdout is not None
        fleet.stdin.close()
        stop(fleet, signal.SIGTERM)
        said = fleet.stdout.read().strip().splitlines()
        self.stats = json.loads(said[-1]) if said else {}


STILL = frozenset({"address", "time", "labels", "mark", "behind_s", "read_at"})
"""A line's fields that are not the server's figures."""


def stale(lines: Sequence[dict[str, Any]], live: set[str]) -> dict[str, list[float]]:
    """How long each live row had shown the same figures, at each of its lines: the seconds
    between the line and the first line that showed them (0 when they moved since the last:
    a simulated server's figures move every step, every page every half second). A line a
    second: whole seconds. By the kind of server (``plugin``: records over tcp; ``metrics``:
    a ``/metrics`` page), since the two are read by different work."""
    since: dict[str, tuple[str, float]] = {}
    ages: dict[str, list[float]] = {"plugin": [], "metrics": []}
    for line in lines:
        address = line["address"]
        if address not in live:
            continue
        shown = json.dumps({k: v for k, v in line.items() if k not in STILL}, sort_keys=True)
        at = line["time"]
        first = since.get(address)
        if first is None or first[0] != shown:
            since[address] = first = (shown, at)
        ages["metrics" if address.startswith("http") else "plugin"].append(at - first[1])
    return ages


def ages(lines: Sequence[dict[str, Any]], live: set[str]) -> dict[str, list[float]]:
    """How old each live row's figures were at each of its lines: the line's time less the
    watch's last read of that server (its ``read_at``; a row never read counts from the
    window's first line), by kind as in :func:`stale`. Exact where :func:`stale` has a
    line's resolution: a row is behind its server by this plus the record's delivery
    (``behind_s``, plug-in servers) or the page's own age."""
    out: dict[str, list[float]] = {"plugin": [], "metrics": []}
    start = lines[0]["time"] if lines else 0.0
    for line in lines:
        address = line["address"]
        if address in live:
            read = line.get("read_at") or start
            out["metrics" if address.startswith("http") else "plugin"].append(line["time"] - read)
    return out


def measure(
    servers: int,
    seconds: float,
    steps_per_s: float,
    folder: Path,
    nice: Sequence[str] = (),
    dead: int = 0,
) -> dict[str, Any]:
    """Start the fleet and the watch, measure for ``seconds`` once all are up; ``nice``: the
    watch's ``--nice`` flag, when not its default (lowered by 10); ``dead``: servers down or
    hung, not waited for."""
    watch: subprocess.Popen[str] | None = None
    with SimulatedFleet(servers, steps_per_s, folder, dead=dead) as fleet:
        try:
            command = module_command(
                "stepview", "--attach-file", str(fleet.listing), "--headless",
                "--log-file", str(folder / "watch.log"), *nice,
            )  # fmt: skip
            with (folder / "watch.err").open("w") as errors:
                watch = subprocess.Popen(
                    command, env=child_env(), stdout=subprocess.PIPE, stderr=errors,
                    stdin=subprocess.DEVNULL, text=True, preexec_fn=sigint_as_a_user_has_it,
                )  # fmt: skip
            assert watch.stdout is not None
            lines = Lines(watch.stdout)
            process = psutil.Process(watch.pid)
            began = time.monotonic()
            while lines.up() < fleet.live:
                if watch.poll() is not None:
                    raise SystemExit(f"the watch exited ({watch.returncode}); see {folder}")
                if time.monotonic() - began > REACH_TIMEOUT_S:
                    raise SystemExit(
                        f"{lines.up()} of {fleet.live} servers up after {REACH_TIMEOUT_S} s"
                    )
                time.sleep(0.2)
            reached = time.monotonic() - began
            first, start, cpu_start = len(lines.every), time.monotonic(), cpu_seconds(process)
            time.sleep(seconds)
            cpu, wall = cpu_seconds(process) - cpu_start, time.monotonic() - start
            rss = process.memory_info().rss / 2**20
            threads = process.num_threads()  # the kernel's count: zmq's and the pool's alike
            window = lines.every[first:]
            up = lines.up()
            code = stop(watch)
        finally:
            if watch is not None:
                stop(watch, signal.SIGKILL)
    simulated = fleet.stats
    listed = fleet.listing.read_text().split()
    gone = set(fleet.listing.with_name(fleet.listing.name + ".dead").read_text().split())
    behind = [r["behind_s"] for r in window if r.get("behind_s") is not None]
    if code != 0 or not behind:  # the folder goes with the run: say what it held
        said = [
            line
            for name in ("watch.err", "watch.log")
            if (folder / name).exists()
            for line in (folder / name).read_text(errors="replace").splitlines()[-8:]
        ]
        raise SystemExit(
            f"the watch exited {code}, {len(behind)} lines with behind_s; its stderr and log "
            "end:\n" + "\n".join(said)
        )
    return {
        "reached_s": reached,
        "cpu_pct": 100.0 * cpu / wall,
        "behind": behind,
        "rss_mb": rss,
        "threads": threads,
        "stale": stale(window, set(listed) - gone),
        "ages": ages(window, set(listed) - gone),
        "up": up,
        "simulated": simulated,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--servers", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--steps-per-s", type=float, default=20.0, help="each plug-in server's")
    parser.add_argument(
        "--dead", type=float, default=0.0, metavar="SHARE",
        help="this share of the servers down or hung (0.25: a quarter)",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="4 servers for 8 s: a smoke test")
    args = parser.parse_args(argv)
    servers, seconds = (4, 8.0) if args.quick else (args.servers, args.seconds)
    with tempfile.TemporaryDirectory(prefix="stepview-fleet-") as tmp:
        # The smoke test checks the plumbing, not the figure: its watch is not niced, which
        # beside a test run's engines left it so little CPU that it took minutes to stop.
        nice = ("--nice", "0") if args.quick else ()
        dead = round(servers * args.dead)
        got = measure(servers, seconds, args.steps_per_s, Path(tmp), nice, dead)
    behind, simulated, kinds = got["behind"], got["simulated"], got["stale"]
    unchanged = [age for each in kinds.values() for age in each]
    worst = " ".join(f"stale_s_max_{kind}={max(each):.1f}" for kind, each in kinds.items() if each)
    read = got["ages"]
    old = [age for each in read.values() for age in each]
    for kind, each in read.items():
        if each:
            p99 = statistics.quantiles(each, n=100)[98] if len(each) > 1 else each[0]
            print(
                f"{kind} rows: figures read {statistics.median(each):.2f} s before their line "
                f"(p50), {p99:.2f} s (p99), {max(each):.2f} s at most"
            )
    live = f"all {servers}" if not dead else f"the {servers - dead} live of {servers}"
    print(f"{live} servers up after {got['reached_s']:.1f} s; measured for {seconds:.0f} s")
    print(
        f"simulated fleet: {simulated['steps_per_s']} steps/s per plug-in server, "
        f"{simulated['records']} records, scrapes per page {simulated['scrapes']}"
    )
    p99 = statistics.quantiles(behind, n=100)[98] if len(behind) > 1 else behind[0]
    print(f"{len(behind)} lines with behind_s; p99 {p99:.2f} s")
    print(
        f"fleet_scale rows: live={servers - dead} dead={dead} threads={got['threads']} "
        f"stale_s_p50={statistics.median(unchanged):.1f} stale_s_max={max(unchanged):.1f} "
        f"{worst} read_age_s_p50={statistics.median(old):.2f} read_age_s_max={max(old):.2f}"
    )
    print(
        f"fleet_scale: servers={servers} cpu_pct_per_server={got['cpu_pct'] / servers:.2f} "
        f"lag_s_p50={statistics.median(behind):.2f} lag_s_max={max(behind):.2f} "
        f"rss_mb={got['rss_mb']:.1f} cpu_pct={got['cpu_pct']:.1f} up={got['up']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
