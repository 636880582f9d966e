"""A real server with a long queue, watched: how far behind the view falls, what it costs.

vLLM's API server on the demo model with stepview's plug-in, ``--max-num-seqs 32``, takes a
load of ``--requests`` (4 000) completions sent at once, so ~3 970 wait at the start. One
server serves every round (rounds use distinct prompts: no prefix-cache help between them),
and the rounds alternate, ABAB:

* ``plugin``: nobody attached (the plug-in checks for a subscriber once per step);
* ``attached``: ``stepview --attach`` drawing it in a 120x40 tmux pane on the same machine
  (default ``--nice 10``), with ``--results`` and ``--metrics-port``.

``--without-api`` adds a third round to each pair, attached without ``--api`` (no text for
other clients' requests): what the text costs (the three take turns going first). A round
with ``--api`` also says how many results were written with their text.

Attached, the benchmark measures how far the view falls behind from outside the watch: it
notes when the client got each answer, and when each line of stepview's results file
appeared (the file is flushed per step read); the k-th result written against the k-th
answer, at most, is ``behind_max_s``. (stepview's own ``stepview_view_behind_seconds``, read
every 0.25 s, is printed beside it: a watch starved of CPU answers no scrape while it is
furthest behind, so its gauge reads low then.) The catch-up is from the last answer the
server gave to the moment stepview's results file holds every request. Throughput is
completion tokens over first send to last answer; the figure is the median of the per-pair
ratios (attached over the plugin round next to it). The last line is
``long queue: attached/plugin=X behind_max_s=Y catch_up_s=Z`` (medians over pairs). A
results file that stops growing short of the load (:data:`STALLED_S`) is a finding, not a
crash: the pair's line says how many requests the watch never wrote, and so does a line
before the last. SIGTERM ends it as Ctrl+C does: the server and the tmux pane go with it.

Run it alone on the machine (``flock /tmp/stepview-engine.lock ...``). ``--server URL
--publish ADDRESS`` uses a server already running (:mod:`benchmarks.given_server`; its own
``--max-num-seqs``, not 32): the smoke test runs ``--quick`` so on the test suite's shared
plug-in server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from benchmarks.given_server import add_server_flags, plugged
from benchmarks.tmux_pane import Tmux, stepview_command
from stepview.testing.vllm_server import (
    MODEL_NAME,
    ApiServer,
    complete,
    free_port,
    server_command,
    server_env,
)

BEHIND = "stepview_view_behind_seconds"
POLL_S = 0.25
FILE_POLL_S = 0.05  # how often the results file is looked at: the resolution of the lag
STALLED_S = 60.0
"""A results file that has not grown for this long after the last answer has all it will get."""


async def _send_all(
    port: int, prompts: Sequence[str], max_tokens: int, answered: list[float]
) -> int:
    """Every prompt as one completion, all at once; the completion tokens they got. Each
    answer's time (``time.perf_counter``) goes into ``answered`` as it comes."""
    import aiohttp  # a vLLM dependency

    url = f"http://127.0.0.1:{port}/v1/completions"
    timeout = aiohttp.ClientTimeout(total=1800)
    connector = aiohttp.TCPConnector(limit=0)  # no client-side cap: the server queues them
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:

        async def one(prompt: str) -> int:
            body = {
                "model": MODEL_NAME,
                "prompt": prompt,
                "max_tokens": max_tokens,
                "temperature": 0,
                "ignore_eos": True,
            }
            async with session.post(url, json=body) as answer:
                answer.raise_for_status()
                tokens = int((await answer.json())["usage"]["completion_tokens"])
            answered.append(time.perf_counter())
            return tokens

        return sum(await asyncio.gather(*(one(p) for p in prompts)))


def send_load(
    port: int, round_no: int, requests: int, max_tokens: int, answered: list[float] | None = None
) -> tuple[int, float]:
    """The round's load; completion tokens, and first send to last answer in seconds (each
    answer's time into ``answered``, when given)."""
    prompts = [f"round {round_no} request {i}: tell me about the sea" for i in range(requests)]
    started = time.perf_counter()
    tokens = asyncio.run(_send_all(port, prompts, max_tokens, [] if answered is None else answered))
    return tokens, time.perf_counter() - started


def read_behind(metrics_port: int) -> float | None:
    """stepview's view-behind gauge now (None if its endpoint does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as page:
            text = page.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(BEHIND + " "):
            return float(line.split()[1])
    return None


class BehindWatch:
    """Polls the gauge on a thread until stopped; the largest value seen."""

    def __init__(self, metrics_port: int) -> None:
        self.port = metrics_port
        self.most = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            value = read_behind(self.port)
            if value is not None:
                self.most = max(self.most, value)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.most


def attach(
    publish: str, port: int, workdir: Path, metrics_port: int, api: bool = True
) -> tuple[Tmux, Path]:
    """``stepview --attach`` in tmux (with ``--api``, unless not ``api``), once it shows the
    server; and its results file."""
    results = workdir / "attached.jsonl"
    argv = [
        *stepview_command(),
        *("--attach", publish),
        *(("--api", f"http://127.0.0.1:{port}") if api else ()),
        *("--results", str(results), "--log-file", str(workdir / "stepview.log")),
        *("--metrics-port", str(metrics_port)),
    ]
    tmux = Tmux(f"stepview-long-queue-{workdir.name}", server_env(None))
    tmux.start(shlex.join(argv))
    deadline = time.monotonic() + 60
    while f"@ {publish}" not in tmux.screen():
        if time.monotonic() > deadline or not tmux.alive():
            tmux.kill()
            raise RuntimeError(f"stepview --attach did not show the server; see {workdir}")
        time.sleep(0.2)
    return tmux, results


class ResultsClock:
    """When each line of the watch's results file appeared (``time.perf_counter``), seen by
    polling it every :data:`FILE_POLL_S` on a thread, reading only what was appended."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.times: list[float] = []
        self._read = 0  # bytes read so far
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(FILE_POLL_S):
            try:
                with self.path.open("rb") as results:
                    results.seek(self._read)
                    new = results.read()
            except FileNotFoundError:
                continue
            self._read += len(new)
            self.times.extend([time.perf_counter()] * new.count(b"\n"))

    def wait(self, wanted: int, since: float) -> tuple[float, int]:
        """Seconds from ``since`` to the last result written, and how many of ``wanted``
        never were (the file did not grow for :data:`STALLED_S`)."""
        have, grew = len(self.times), time.perf_counter()
        while have < wanted and time.perf_counter() - grew < STALLED_S:
            time.sleep(FILE_POLL_S)  # the thread reads the file
            now = len(self.times)
            if now > have:
                have, grew = now, time.perf_counter()
        self._stop.set()
        self._thread.join()
        return (self.times[-1] if self.times else grew) - since, wanted - have


def written_behind(answered: Sequence[float], written: Sequence[float]) -> float:
    """How far the results file fell behind the client's answers, at most: the k-th result
    written against the k-th answer received, for every k (a watch that falls behind holds
    finished requests back; one on time writes each as its answer comes)."""
    lags = [line - answer for answer, line in zip(sorted(answered), written, strict=False)]
    return max([0.0, *lags])


class Attached(NamedTuple):
    """An attached round: tokens per second, the most the results file fell behind the
    answers, its catch-up after the load, the requests it never wrote, those written with
    their text, and the most the watch's own gauge said it was behind."""

    tokens_per_s: float
    behind: float
    catch_up: float
    missing: int
    texts: int
    gauge: float


def attached_round(
    server: ApiServer,
    publish: str,
    round_no: int,
    args: argparse.Namespace,
    workdir: Path,
    api: bool = True,
) -> Attached:
    """One round watched by ``stepview --attach`` (with ``--api`` unless not ``api``)."""
    metrics_port = free_port()
    tmux, results = attach(publish, server.port, workdir, metrics_port, api)
    try:
        watch = BehindWatch(metrics_port)
        clock = ResultsClock(results)
        answers: list[float] = []
        tokens, span = send_load(server.port, round_no, args.requests, args.max_tokens, answers)
        catch_up, missing = clock.wait(args.requests, time.perf_counter())
        gauge = watch.stop()
        tmux.press("q")
        deadline = time.perf_counter() + 60
        while tmux.alive() and time.perf_counter() < deadline:
            time.sleep(0.1)
    finally:
        tmux.kill()
    behind = written_behind(answers, clock.times)
    return Attached(tokens / span, behind, catch_up, missing, with_text(results), gauge)


def with_text(results: Path) -> int:
    """Results whose every completion has its text (decoded through ``--api``)."""
    if not results.exists():
        return 0
    lines = (json.loads(line) for line in results.read_text().splitlines())
    return sum(all(c.get("text") for c in line["completions"]) for line in lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--pairs", type=int, default=4, help="ABAB pairs (default 4)")
    parser.add_argument("--requests", type=int, default=4000, help="completions (default 4000)")
    parser.add_argument("--max-tokens", type=int, default=16, help="tokens each (default 16)")
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 pair of 64 x 4")
    parser.add_argument(
        "--without-api",
        action="store_true",
        help="a third round in each pair, attached without --api (what the text costs)",
    )
    add_server_flags(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.pairs, args.requests, args.max_tokens = 1, 64, 4
    root = Path(tempfile.mkdtemp(prefix="stepview-long-queue-"))
    given = plugged(args)
    server: ApiServer
    if given is not None:
        server, publish, seqs = given, given.publish or "", "the given server's max_num_seqs"
    else:
        from stepview.engine.own.tiny_model import ensure_tiny_model

        port, publish, seqs = free_port(), f"tcp://127.0.0.1:{free_port()}", "max_num_seqs 32"
        command = [*server_command(ensure_tiny_model(), port), "--max-num-seqs", "32"]
        server = ApiServer(command, server_env(publish), port, root / "server.log")
    port = server.port
    print(
        f"long_queue: {args.requests} completions x {args.max_tokens} tokens at once, "
        f"{seqs}, {args.pairs} ABAB pair(s), one server with the plug-in",
        flush=True,
    )
    rounds: dict[bool, list[tuple[float, Attached]]] = {True: [], False: []}  # by --api
    kinds = (None, True, False) if args.without_api else (None, True)  # None: nobody attached
    # SIGTERM as Ctrl+C: the finally below takes the server (and a round's tmux) with it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        server.start()
        complete(port, "warm up", 4)
        # An untimed load first: the first batches of every size are slow, and would be
        # the first pair's alone.
        send_load(port, 0, min(args.requests, 256), args.max_tokens)
        round_no = 0
        for pair in range(args.pairs):
            # Three ways: each takes its turn first (a slow patch of the machine hits all).
            shift = pair % len(kinds) if args.without_api else 0
            found: dict[bool, Attached] = {}
            alone = 0.0
            for api in kinds[shift:] + kinds[:shift]:
                round_no += 1
                if api is None:
                    tokens, span = send_load(port, round_no, args.requests, args.max_tokens)
                    alone = tokens / span
                    continue
                workdir = root / f"r{round_no}"
                workdir.mkdir()
                found[api] = attached_round(server, publish, round_no, args, workdir, api)
            for api, watched in found.items():
                rounds[api].append((alone, watched))
                say_pair(pair, alone, watched, api, root)
    finally:
        server.kill()
        if not any(w.missing for kind in rounds.values() for _, w in kind):
            shutil.rmtree(root, ignore_errors=True)  # (one that lost results keeps its files)
    if args.without_api:
        ratios, behinds, _ = medians(rounds[False])
        print(f"without --api: attached/plugin={ratios:.3f} behind_max_s={behinds:.2f}")
    ratios_by_pair = [watched.tokens_per_s / alone for alone, watched in rounds[True]]
    print(f"per-pair ratios: {', '.join(f'{r:.3f}' for r in ratios_by_pair)}")
    missed = [watched.missing for _, watched in rounds[True]]
    if any(missed):
        print(f"results never written, per pair: {', '.join(map(str, missed))} (see {root})")
    ratio, behind, catch_up = medians(rounds[True])
    print(
        f"long queue: attached/plugin={ratio:.3f} behind_max_s={behind:.2f} "
        f"catch_up_s={catch_up:.2f}"
    )
    return 0


def say_pair(pair: int, alone: float, watched: Attached, api: bool, root: Path) -> None:
    """A pair's line (and, with ``--api``, how many results have their text)."""
    written = (
        f"all results {watched.catch_up:.2f} s after the last answer"
        if not watched.missing
        else f"{watched.missing} results never written (the last {watched.catch_up:.2f} s "
        f"after the last answer; see {root})"
    )
    name = "attached" if api else "without --api"
    print(
        f"  pair {pair + 1}: plugin {alone:.0f} tok/s, {name} {watched.tokens_per_s:.0f} tok/s "
        f"(ratio {watched.tokens_per_s / alone:.3f}); results at most {watched.behind:.2f} s "
        f"behind the answers (its gauge: {watched.gauge:.2f} s), {written}",
        flush=True,
    )
    if api:
        print(f"    with their text (--api): {watched.texts} results", flush=True)


def medians(rounds: list[tuple[float, Attached]]) -> tuple[float, float, float]:
    """The median ratio, view behind and catch-up of one kind of round."""
    return (
        statistics.median(watched.tokens_per_s / alone for alone, watched in rounds),
        statistics.median(watched.behind for _, watched in rounds),
        statistics.median(watched.catch_up for _, watched in rounds),
    )


if __name__ == "__main__":
    raise SystemExit(main())
