"""One vLLM server watched through its Prometheus ``/metrics`` alone (``--attach http://…``).

A server started without stepview's plug-in still publishes, at ``/metrics``, its queue sizes,
the KV cache's use and cumulative counters and histograms. :class:`MetricsWatch` reads that
page on each :meth:`~MetricsWatch.scrape` and answers the same :class:`StepSnapshot` the other
modes answer: the header's counters and sparklines from the page's gauges and counter
increases (one "step" per scrape, of the scrape interval), and a
:class:`~stepview.model.server_window.ServerWindow` with what only a window can say (latency
percentiles, finished requests, preemptions over the last ``window`` seconds).

One instance per server and no shared state, so that several servers can be watched side by
side. A scrape that fails (a server stopped, restarting, unreachable) gives a DISCONNECTED
snapshot that keeps the last figures, and the next good one carries on; the counters' reset
after a restart is the window's business (:mod:`stepview.insight.histogram_window`).
"""

from __future__ import annotations

import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace

from stepview.engine.watch.api.server_api import ApiError, ServedModel, ServerApi
from stepview.engine.watch.metrics.kv_events_watch import KvEventsWatch
from stepview.engine.watch.metrics.metrics_page import (
    GENERATION_TOKENS,
    ITERATION_TOKENS,
    KV_CACHE_USAGE,
    LATENCIES,
    PREEMPTIONS,
    PREFIX_HITS,
    PREFIX_QUERIES,
    PROMPT_TOKENS,
    RUNNING,
    WAITING,
    MetricsPage,
    NotVllmMetrics,
    read_page,
)
from stepview.insight.histogram_window import CounterWindow, HistogramWindow, quantile
from stepview.model.errors import describe
from stepview.model.server_window import NOT_VLLM, QUANTILES, Latency, ServerWindow
from stepview.model.snapshot import (
    EngineCounters,
    EngineInfo,
    EngineState,
    RecentStep,
    StepSnapshot,
)

PLUGIN = "stepview.engine.scheduler_plugin.StepviewScheduler"
"""The plug-in's published name (``engine/plugin/config.py``'s, which this room may not import)."""
PUBLISH = "tcp://127.0.0.1:5570"
"""The publish address the restart line suggests (docs/attach-and-fleet.md's)."""
RECENT_SCRAPES = 120
"""Scrapes kept for the header's sparklines."""
SCRAPE_TIMEOUT_S = 5.0


class MetricsWatch:
    """The server at ``api.base_url``, one snapshot per :meth:`scrape` (not thread-safe: one
    caller). ``window``: the seconds latency percentiles and finished counts cover; ``turn``:
    held while a page is read into figures, never while the server is asked (a fleet's watches
    share one: see :class:`~stepview.engine.driver.loop.Driver`)."""

    def __init__(
        self,
        api: ServerApi,
        *,
        window: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        kv_events: KvEventsWatch | None = None,
        turn: AbstractContextManager[object] | None = None,
    ) -> None:
        self.api = api
        self._turn = nullcontext() if turn is None else turn
        self.kv_events = kv_events  # its KV events, read on each scrape, where watched
        self.address = api.base_url
        self.window = window
        self._clock = clock
        self._start: float | None = None
        self._step = 0
        self._last_at: float | None = None
        self._since = 0.0  # when the state last changed
        self._served: ServedModel | None = None
        self._latencies = {name: HistogramWindow(window) for name in LATENCIES}
        self._iterations = CounterWindow(window)  # engine steps: ITERATION_TOKENS' count
        self._preemptions = CounterWindow(window)
        self._hits = CounterWindow(window)
        self._queries = CounterWindow(window)
        self._prompt = CounterWindow(window)
        self._generated = CounterWindow(window)
        self._finished: dict[str, CounterWindow] = {}
        self._recent: deque[RecentStep] = deque(maxlen=RECENT_SCRAPES)
        self._total_generated = 0
        self.latest = StepSnapshot(
            step=0,
            clock=0.0,
            engine_state=EngineState.STARTING,
            # Named by its address until its API answers, as a plug-in watch is: a server
            # that never answers still says which one it is (the fleet's Enter opens it).
            info=EngineInfo(
                model=f"vLLM server at {self.address}", attached=self.address, detailed_states=False
            ),
            phase=f"connecting to {self.address}",
        )

    def scrape(self) -> StepSnapshot:
        """Read ``/metrics`` once; the snapshot it makes (also :attr:`latest`)."""
        clock = self.moment()
        try:
            text = self.api.get_text("/metrics", SCRAPE_TIMEOUT_S)
        except ApiError as exc:
            return self.absorb(clock, exc)
        return self.absorb(clock, text)

    def moment(self) -> float:
        """The watch's clock now (its first call is 0): a scrape is dated as it starts."""
        now = self._clock()
        if self._start is None:
            self._start = now
        return now - self._start

    def absorb(self, clock: float, got: str | ApiError) -> StepSnapshot:
        """The page read at ``clock`` (or why it could not be), into the snapshot it makes
        (also :attr:`latest`): :meth:`scrape`'s second half, for a page read elsewhere (a
        fleet's event loop)."""
        try:
            if isinstance(got, ApiError):
                raise got
            with self._turn:
                page = read_page(got)
        except ApiError as exc:  # its message starts with the address, said already
            self.latest = self._lost(clock, str(exc).removeprefix(f"{self.api.base_url}: "))
            return self.latest
        except NotVllmMetrics as exc:  # another program on that port, or vLLM not up yet
            self.latest = self._lost(clock, f"{NOT_VLLM}{exc}")
            return self.latest
        except ValueError as exc:  # vLLM's series, broken
            self.latest = self._lost(clock, describe(exc))
            return self.latest
        self._model(page)  # the API asked, where it must be, out of the turn: it may wait
        with self._turn:
            self.latest = self._read(clock, page)
        return self.latest

    def close(self) -> None:
        """Let go of the KV events' socket (the scraping thread done)."""
        if self.kv_events is not None:
            self.kv_events.close()

    def _lost(self, clock: float, why: str) -> StepSnapshot:
        """Not reached: STARTING until it has been, DISCONNECTED after (figures kept)."""
        before = self.latest
        if before.engine_state is EngineState.STARTING:
            phase = f"connecting to {self.address}: {why}; trying again"
            return replace(before, clock=clock, phase=phase)
        if before.engine_state is not EngineState.DISCONNECTED:
            self._since = clock
        phase = f"DISCONNECTED from {self.address} — reconnecting ({why})"
        return replace(
            before,
            clock=clock,
            engine_state=EngineState.DISCONNECTED,
            phase=phase,
            phase_since=self._since,
            ranks=tuple(rank._replace(connected=False) for rank in before.ranks),
        )

    def _read(self, clock: float, page: MetricsPage) -> StepSnapshot:
        interval = clock - self._last_at if self._last_at is not None else 0.0
        self._last_at = clock
        self._step += 1
        for name, names in LATENCIES.items():
            self._latencies[name].add(clock, page.histogram(names))
        iterations = page.histogram(ITERATION_TOKENS)
        self._iterations.add(clock, iterations.observations if iterations else None)
        preempted = int(self._preemptions.add(clock, page.counter(PREEMPTIONS)))
        self._hits.add(clock, page.counter(PREFIX_HITS))
        self._queries.add(clock, page.counter(PREFIX_QUERIES))
        prompt = int(self._prompt.add(clock, page.counter(PROMPT_TOKENS)))
        generated = int(self._generated.add(clock, page.counter(GENERATION_TOKENS)))
        for reason, count in (page.finished_by_reason or {}).items():
            self._finished.setdefault(reason, CounterWindow(self.window)).add(clock, count)
        self._total_generated += generated
        running, waiting = int(page.gauge(RUNNING) or 0), int(page.gauge(WAITING) or 0)
        kv = page.gauge(KV_CACHE_USAGE) or 0.0
        recent = RecentStep(self._step, clock, interval, running, waiting, kv, generated)
        self._recent.append(recent)
        state = EngineState.RUNNING if running or waiting else EngineState.IDLE
        if state is not self.latest.engine_state:
            self._since = clock
        queries = self._queries.increase()
        return StepSnapshot(
            step=self._step,
            clock=clock,
            engine_state=state,
            info=self._info(page),
            phase_since=self._since,
            step_time=interval,
            counters=EngineCounters(
                running=running,
                waiting=waiting,
                kv_cache_usage=kv,
                prompt_tokens=prompt,
                generation_tokens=generated,
                prefix_cache_queries=int(page.counter(PREFIX_QUERIES) or 0),
                prefix_cache_hits=int(page.counter(PREFIX_HITS) or 0),
                preemptions=preempted,
            ),
            recent=tuple(self._recent),
            total_generated=self._total_generated,
            ranks=page.ranks,
            server=ServerWindow(
                address=self.address,
                span=self.window,
                covered=min(self.window, clock),
                latencies=tuple(_latency(name, w) for name, w in self._latencies.items()),
                waiting_by_reason=tuple(
                    (reason, int(count)) for reason, count in (page.waiting_by_reason or {}).items()
                ),
                finished=tuple(
                    (reason, int(window.increase()))
                    for reason, window in self._finished.items()
                    if window.increase()
                ),
                finished_total=int(sum((page.finished_by_reason or {}).values())),
                preemptions=int(self._preemptions.increase()),
                prefix_hit_rate=self._hits.increase() / queries if queries else None,
                steps_per_s=self._iterations.increase() / min(self.window, clock)
                if clock > 0 and iterations is not None
                else None,
                plugin_hint=restart_hint(self.address, self._model(page), len(page.ranks)),
                kv_blocks=None if self.kv_events is None else self.kv_events.poll(clock),
            ),
        )

    def _info(self, page: MetricsPage) -> EngineInfo:
        served = self._model(page)
        return EngineInfo(
            model=f"{served.name} @ {self.address}",  # as a plug-in watch names its server
            vllm_version=served.vllm_version,
            max_model_len=served.max_model_len,
            detailed_states=False,
            attached=self.address,
        )

    def _model(self, page: MetricsPage) -> ServedModel:
        """The served model: the API's word (name, path, version), looked up once per server
        reached; the page's ``model_name`` when the API will not say."""
        served = self._served
        if served is None or (page.model and served.name != page.model):
            try:
                served = self.api.model(refresh=True)
            except ApiError:
                served = ServedModel(page.model)
            self._served = served
        return served


def _latency(name: str, window: HistogramWindow) -> Latency:
    """One latency's percentiles and observations over the window."""
    observed = window.observed()
    p50, p90, p99 = (quantile(q, observed) for q in QUANTILES)
    return Latency(name, p50, p90, p99, int(observed.observations) if observed else 0)


def restart_hint(address: str, model: ServedModel, ranks: int = 1) -> str:
    """The line that restarts this server with the plug-in, and the watch that then follows.

    The model as the server loaded it (``root``) with its served name when that differs, the
    port of ``address``, its data-parallel size when it has several ``ranks`` (each one
    publishes on a port of its own, all watched); the server's other flags are its owner's
    to add back.
    """
    parts = urllib.parse.urlsplit(address)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    name = model.name or "MODEL"
    loaded = model.root or name
    served = f" --served-model-name {name}" if model.root and model.root != name else ""
    parallel = f" --data-parallel-size {ranks}" if ranks > 1 else ""
    watched = f" --attach-ranks {ranks}" if ranks > 1 else ""
    return (
        f"STEPVIEW_PUBLISH={PUBLISH} \\\n"
        f"  python -m vllm.entrypoints.openai.api_server --model {loaded}{served} "
        f"--port {port}{parallel} \\\n"
        f"  --scheduler-cls {PLUGIN}\n"
        f"stepview --attach {PUBLISH}{watched} --api {address}"
    )
