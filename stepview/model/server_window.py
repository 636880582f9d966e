"""A server watched through its Prometheus ``/metrics`` alone: what a scrape adds to a snapshot.

A server without stepview's plug-in (``stepview --attach http://HOST:PORT``) tells no request
apart; its ``/metrics`` gives queue sizes now and totals since it started. The header's
counters and sparklines come from those as for any engine (:class:`EngineCounters`,
:class:`RecentStep`); this is the rest: latency percentiles and finished requests over the
last seconds (read off histogram and counter increases, see
:mod:`stepview.insight.histogram_window`), why requests wait (vLLM's own reasons), and how to
get the per-request view. Plain values, so a snapshot that carries it stays immutable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

QUANTILES = (0.5, 0.9, 0.99)
"""The percentiles shown of each latency (p50, p90, p99)."""

NOT_VLLM = "its /metrics is "
"""How a connecting watch's phase says that the page there is not vLLM's (what it is follows,
up to ``; ``): the fleet row shows the same words (:func:`not_vllm`)."""


def not_vllm(phase: str) -> str | None:
    """What a connecting ``/metrics`` watch found there instead of vLLM, from its phase."""
    _, found, rest = phase.partition(NOT_VLLM)
    return rest.split("; ", 1)[0] if found else None


class Latency(NamedTuple):
    """One latency over the window: its percentiles (``None``: nothing observed) and count."""

    name: str  # "ttft", "itl", "e2e", "queue"
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    observed: int = 0


@dataclass(frozen=True, slots=True)
class ServerWindow:
    """What the server's ``/metrics`` said about the last ``span`` seconds (``covered``: how
    many of them the watch has seen so far)."""

    address: str  # the http://HOST:PORT watched
    span: float
    covered: float = 0.0
    latencies: tuple[Latency, ...] = ()
    # vLLM's reasons ("capacity", "deferred") -> requests waiting for it now; empty when the
    # server's vLLM does not say (older than 0.32).
    waiting_by_reason: tuple[tuple[str, int], ...] = ()
    finished: tuple[tuple[str, int], ...] = ()  # finish reason -> requests, in the window
    finished_total: int = 0  # requests finished since the server started
    preemptions: int = 0  # in the window
    prefix_hit_rate: float | None = None  # prefix-cache hits / queries, in the window
    steps_per_s: float | None = None  # the server's engine steps per second, in the window
    plugin_hint: str = ""  # how to restart this server for the per-request view
    kv_blocks: KvBlocks | None = None  # from its KV events, where they are watched too

    def latency(self, name: str) -> Latency:
        for latency in self.latencies:
            if latency.name == name:
                return latency
        return Latency(name)

    @property
    def finished_in_window(self) -> int:
        return sum(count for _, count in self.finished)


@dataclass(frozen=True, slots=True)
class KvBlocks:
    """The server's KV-cache blocks as its published KV events tell them (``--kv-events``):
    churn and prefix-cache reuse over the window, residency now. Blocks, not tokens."""

    address: str  # the tcp://HOST:PORT subscribed to
    batches: int = 0  # event batches received since the watch began (0: none yet)
    stored_per_s: float = 0.0  # blocks computed and cached, per second over the window
    removed_per_s: float = 0.0  # blocks evicted, per second over the window
    stored: int = 0  # in the window
    reused: int = 0  # blocks taken from the prefix cache, in the window (see kv_blocks)
    recomputed: int = 0  # blocks computed again after their eviction, in the window
    resident: int = 0  # blocks cached now, as far as the events seen say
    missed: int = 0  # batches lost since the watch began (sequence gaps)
    restarts: int = 0  # times the publisher started again (sequence numbers went back)
    clears: int = 0  # AllBlocksCleared seen since the watch began
    problem: str = ""  # the last message that could not be read, if any
    connected: bool = False  # the connection to the publisher is up (events can arrive)

    @property
    def reuse_share(self) -> float | None:
        """Reused blocks / (reused + computed) in the window: ``None`` when neither."""
        needed = self.reused + self.stored
        return self.reused / needed if needed else None
