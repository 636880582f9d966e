"""A fleet of simulated vLLM servers in one process, for ``fleet_scale``: plug-in servers
publishing records, and unmodified ones answering ``/metrics``.

``python -m benchmarks.fleet_servers --plugin N --metrics M --file FILE`` starts them, writes
their addresses to FILE (one a line, as ``--attach-file`` reads them; written whole, then
renamed) and runs until stdin closes or a signal, then prints one JSON line: how many records
it published and at what pace, and how often each page was scraped.

A plug-in server is a :class:`~benchmarks.synthetic_core.SyntheticCore` behind the plug-in's
own :class:`~stepview.engine.plugin.publisher.FactsPublisher` on a ``tcp://`` address, sending
as a server does (``STEPVIEW_PUBLISH_EVERY_MS``'s default batching), at a server's pace: a
few requests running (2 to 8 at most), one or two waiting, a step every ``1/--steps-per-s``
s, one token each. As in the plug-in, a core with no subscriber builds no record (it stands
still). The cores take turns on one thread, spread over each step's interval.

A ``/metrics`` server is a page with vLLM's metric names, in the format vLLM's own
``prometheus_client`` writes (the series stepview reads, and histograms it does not, so a page
is about as long as a real one: ~30 KB), with ``/v1/models`` and ``/version``; its figures
move every half second (requests running and waiting, tokens, finished requests with their
TTFT and latencies). The page is prometheus_client's text with the values of the moment put
in (:func:`page_writer`: 0.7 ms, where ``generate_latest`` took 3 ms: a thousand servers'
pages read each second took a core of the fleet's process, whose plug-in servers then stepped
at half their pace).

``--dead N``: N of the servers (in the same proportions of each kind) are listed but down or
hung (:class:`Dead`), as in a large fleet where some always are; their addresses are also in
``FILE.dead``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.utils import floatToGoString

from benchmarks.synthetic_core import SyntheticCore
from stepview.engine.plugin.config import publish_every
from stepview.engine.plugin.publisher import FactsPublisher
from stepview.testing.vllm_server import free_port

MODEL = "fleet-sim"
LABELS = ("engine", "model_name")
# vLLM 0.32's buckets (its /metrics, tests/data/metrics).
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                   2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                   60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
               7.5, 10.0, 20.0, 40.0, 80.0)  # fmt: skip
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
PAGE_TICK_S = 0.5


def page_writer(registry: CollectorRegistry) -> Callable[[], str]:
    """What ``generate_latest(registry)`` writes, faster, for a registry whose series are all
    made (no label set added later): its text split once around the values, which each call
    reads from the series themselves (prometheus_client's own samples, in its order) and puts
    back in, formatted as it formats them. Checked equal to ``generate_latest`` when made."""
    text = generate_latest(registry).decode()
    go_string: Callable[[float], str] = floatToGoString
    series: list[Any] = []
    collectors: list[Any] = list(registry._collector_to_names)
    for collector in collectors:
        series.extend(collector._metrics.values() if collector._is_parent() else [collector])
    before: list[str] = []  # the text before each value (HELP and TYPE lines, a sample's name)
    pending = ""
    for line in text.splitlines(keepends=True):
        if line.startswith("#"):
            pending += line
        else:
            before.append(pending + line.rpartition(" ")[0] + " ")
            pending = "\n"

    def write() -> str:
        values = [sample.value for one in series for sample in one._child_samples()]
        return "".join(f"{b}{go_string(v)}" for b, v in zip(before, values, strict=True)) + pending

    if write() != text:
        raise RuntimeError("the page written by hand is not prometheus_client's")
    return write


class MetricsPage:
    """One unmodified server: its registry, moved on by :meth:`tick`, served over HTTP."""

    def __init__(self, index: int, seed: int) -> None:
        self.random = random.Random(seed)
        self.base = 1 + index % 6  # servers differ in load: the fleet screen marks some
        self.scrapes = 0
        registry = self.registry = CollectorRegistry()

        def gauge(name: str) -> Any:
            return Gauge(name, name, LABELS, registry=registry).labels("0", MODEL)

        def counter(name: str, *extra: str) -> Any:
            return Counter(name, name, (*LABELS, *extra), registry=registry)

        def histogram(name: str, buckets: Sequence[float]) -> Any:
            return Histogram(name, name, LABELS, buckets=buckets, registry=registry).labels(
                "0", MODEL
            )

        self.running, self.waiting = (
            gauge("vllm:num_requests_running"),
            gauge("vllm:num_requests_waiting"),
        )
        self.kv = gauge("vllm:kv_cache_usage_perc")
        reasons = Gauge(
            "vllm:num_requests_waiting_by_reason", "by reason", (*LABELS, "reason"),
            registry=registry,
        )  # fmt: skip
        self.capacity = reasons.labels("0", MODEL, "capacity")
        reasons.labels("0", MODEL, "deferred").set(0)
        self.preemptions = counter("vllm:num_preemptions").labels("0", MODEL)
        self.prompt = counter("vllm:prompt_tokens").labels("0", MODEL)
        self.generated = counter("vllm:generation_tokens").labels("0", MODEL)
        self.success = counter("vllm:request_success", "finished_reason")
        for reason in ("stop", "length", "abort", "error", "repetition"):
            self.success.labels("0", MODEL, reason)
        self.ttft = histogram("vllm:time_to_first_token_seconds", LATENCY_BUCKETS)
        self.itl = histogram("vllm:inter_token_latency_seconds", ITL_BUCKETS)
        self.e2e = histogram("vllm:e2e_request_latency_seconds", REQUEST_BUCKETS)
        self.queue = histogram("vllm:request_queue_time_seconds", REQUEST_BUCKETS)
        self.iteration = histogram("vllm:iteration_tokens_total", TOKEN_BUCKETS)
        self.unread = [  # series a real page has and stepview skips: a page of real length
            histogram(f"vllm:{name}", REQUEST_BUCKETS)
            for name in ("request_prefill_time_seconds", "request_decode_time_seconds",
                         "request_inference_time_seconds", "request_time_per_output_token_seconds")
        ] + [
            histogram(f"vllm:{name}", TOKEN_BUCKETS)
            for name in ("request_prompt_tokens", "request_generation_tokens",
                         "request_params_max_tokens", "request_max_num_generation_tokens")
        ]  # fmt: skip
        self._write = page_writer(registry)

    def tick(self, seconds: float) -> None:
        """``seconds`` of work: tokens generated, requests finished with their latencies."""
        rand = self.random
        running = max(0, self.base + rand.randint(-1, 2))
        waiting = max(0, self.base - 3 + rand.randint(0, 2))
        self.running.set(running)
        self.waiting.set(waiting)
        self.capacity.set(waiting)
        self.kv.set(min(1.0, 0.04 * running + rand.random() * 0.05))
        tokens = int(running * 20 * seconds)
        self.generated.inc(tokens)
        self.iteration.observe(tokens / max(1, int(20 * seconds)))
        for _ in range(rand.randint(0, max(1, running // 3))):  # requests that finished
            self.success.labels("0", MODEL, "length").inc()
            self.prompt.inc(rand.randint(100, 300))
            self.ttft.observe(0.02 + rand.random() * 0.1 * (1 + waiting))
            self.queue.observe(rand.random() * 0.05 * (1 + waiting))
            self.e2e.observe(5 + rand.random() * 10)
            for histogram in self.unread:
                histogram.observe(rand.random() * 200)
        for _ in range(min(tokens, 20)):
            self.itl.observe(0.04 + rand.random() * 0.02)
        if rand.random() < 0.02:
            self.preemptions.inc()

    def page(self) -> bytes:
        self.scrapes += 1
        return self._write().encode()


def serve(page: MetricsPage, lock: threading.Lock) -> str:
    """Serve ``page`` (and ``/v1/models``, ``/version``) on a free port; its address."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/metrics":
                with lock:
                    body = page.page()
                self._answer(200, body, "text/plain; version=0.0.4; charset=utf-8")
            elif self.path == "/v1/models":
                models = {"data": [{"id": MODEL, "root": MODEL, "max_model_len": 4096}]}
                self._answer(200, json.dumps(models).encode(), "application/json")
            elif self.path == "/version":
                self._answer(200, b'{"version": "0.32.0"}', "application/json")
            else:
                self._answer(404, b'{"detail": "Not Found"}', "application/json")

        def _answer(self, status: int, body: bytes, kind: str) -> None:
            # A watch stopped mid-scrape (fleet_keys ends one stepview after another) hung up:
            # nothing to say, where socketserver would print a traceback for each.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


class PluginServer:
    """One plug-in server: a synthetic core and its publisher."""

    def __init__(self, index: int, seed: int) -> None:
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.publisher = FactsPublisher(self.address, publish_every())
        self.core = SyntheticCore(
            10**9, 1, seed,
            running_max=2 + index % 7, waiting_min=1 + index % 2, preempt_one_in=25,
            name=f"s{index}", block=1,
        )  # fmt: skip
        # Blocks of one token: its KV use moves with every step, so a row that shows the
        # same figures at two lines was not read in between (fleet_scale's "stale"); with
        # vLLM's 16, two running requests kept the same figures for seconds.
        self.records = 0

    def step(self) -> None:
        publisher = self.publisher
        if not publisher.wanted():  # no subscriber: the plug-in builds no record
            return
        full, publisher.fresh = publisher.fresh or self.core.seq == 0, False
        publisher.deliver(self.core.next_record(full))
        self.records += 1


def bound(*, listening: bool) -> socket.socket:
    """A loopback port of its own: ``listening``, the kernel completes connections that
    nobody reads (a hung server); not, each connection is refused (a server down)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    if listening:
        sock.listen(128)
    return sock


class Dead:
    """Servers that are listed and cannot be watched, each kind in the fleet's proportions:
    half of them down (nothing listens: refused at once, or zmq reconnecting), half hung (a
    ``/metrics`` port that accepts a connection and never answers; a plug-in server, its
    publisher bound, that never publishes: an engine core wedged)."""

    def __init__(self, plugins: int, pages: int, seed: int) -> None:
        hung_plugins, hung_pages = plugins // 2, pages // 2
        self.silent = [PluginServer(-1 - i, seed - 1 - i) for i in range(hung_plugins)]
        self.hung = [bound(listening=True) for _ in range(hung_pages)]
        # Down: a port bound and never listened on refuses at once, and stays this server's
        # (a port found free and let go was taken by a live server of the fleet after it:
        # a fleet of 1 000 listed 5 addresses twice).
        self.down = [
            bound(listening=False) for _ in range(plugins - hung_plugins + pages - hung_pages)
        ]
        ports = iter(s.getsockname()[1] for s in self.down)
        self.addresses = (
            [s.address for s in self.silent]
            + [f"tcp://127.0.0.1:{next(ports)}" for _ in range(plugins - hung_plugins)]
            + [f"http://127.0.0.1:{s.getsockname()[1]}" for s in self.hung]
            + [f"http://127.0.0.1:{port}" for port in ports]
        )

    def close(self) -> None:
        for server in self.silent:
            server.publisher.close()
        for sock in (*self.hung, *self.down):
            sock.close()


def write_whole(file: Path, addresses: Sequence[str]) -> None:
    """``addresses`` one a line in ``file``, written whole, then renamed."""
    partial = file.with_name(file.name + ".partial")
    partial.write_text("".join(f"{a}\n" for a in addresses))
    os.replace(partial, file)


def run(
    plugins: int, pages: int, file: Path, steps_per_s: float, seed: int, dead: int = 0
) -> dict[str, Any]:
    """Start the fleet, list it in ``file`` (``dead`` of its servers, listed last, down or
    hung, and also in ``FILE.dead``), step it until stdin closes or a signal."""
    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # as vLLM's
    dead_plugins = dead * plugins // max(1, plugins + pages)
    gone = Dead(dead_plugins, dead - dead_plugins, seed)
    servers = [PluginServer(i, seed + i) for i in range(plugins - dead_plugins)]
    metrics = [MetricsPage(i, seed + 1000 + i) for i in range(pages - (dead - dead_plugins))]
    lock = threading.Lock()  # the pages move on one thread and are read on others
    addresses = [s.address for s in servers] + [serve(page, lock) for page in metrics]
    write_whole(file.with_name(file.name + ".dead"), gone.addresses)
    write_whole(file, addresses + gone.addresses)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def until_stdin_closes() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    print("ready", flush=True)
    interval = 1.0 / steps_per_s
    began = next_page = time.monotonic()
    steps = 0
    while not stop.is_set():
        tick = time.monotonic()
        for i, server in enumerate(servers):  # spread over the step's interval
            server.step()
            pause = tick + interval * (i + 1) / len(servers) - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        steps += 1
        if time.monotonic() >= next_page:
            next_page += PAGE_TICK_S
            with lock:
                for page in metrics:
                    page.tick(PAGE_TICK_S)
        pause = tick + interval - time.monotonic()
        if pause > 0:
            stop.wait(pause)
    took = time.monotonic() - began
    for server in servers:
        server.publisher.close()
    gone.close()
    return {
        "seconds": round(took, 2),
        "steps_per_s": round(steps / took, 2) if servers else None,
        "records": sum(s.records for s in servers),
        "scrapes": [page.scrapes for page in metrics],
    }


def fleet_process(argv: Sequence[str] | None = None) -> int:
    """The fleet's process (not a benchmark of its own: ``fleet_scale`` starts it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--plugin", type=int, default=48)
    parser.add_argument("--metrics", type=int, default=16)
    parser.add_argument("--file", type=Path, required=True)
    parser.add_argument("--steps-per-s", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dead", type=int, default=0, help="of them down or hung")
    args = parser.parse_args(argv)
    stats = run(args.plugin, args.metrics, args.file, args.steps_per_s, args.seed, args.dead)
    print(json.dumps(stats), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(fleet_process())
