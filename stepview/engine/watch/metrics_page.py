"""A vLLM server's Prometheus ``/metrics`` page, read into the figures stepview shows.

The page is parsed with ``prometheus_client``'s own text parser (a dependency of stepview and
of vLLM), not by hand: label quoting, escapes and histogram series are its business. Only the
``vllm:`` series are handed to it: the rest of the page (Python's collector, the HTTP
server's histograms) is most of its lines and none of stepview's business.

Names are vLLM 0.32's (``vllm/v1/metrics/loggers.py``). Every series carries ``engine`` (the
data-parallel rank) and ``model_name``: figures are summed over ranks (the KV cache's use is
their mean); a server with several ranks also has each one's running, waiting and KV use
(:attr:`MetricsPage.ranks`), where an imbalance between them shows. A series the server
does not have (an older vLLM, a metric switched off) reads as ``None``, never 0, so that a
window can tell "nothing happened" from "not known"; where an older vLLM used another name
(``gpu_cache_usage_perc``, ``time_per_output_token_seconds``), that one is read instead.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from prometheus_client.parser import text_string_to_metric_families

from stepview.insight.histogram_window import Histogram
from stepview.model.snapshot import RankStatus

RUNNING = ("vllm:num_requests_running",)
WAITING = ("vllm:num_requests_waiting",)
WAITING_BY_REASON = ("vllm:num_requests_waiting_by_reason",)  # label "reason"
KV_CACHE_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
# Counters, by their family name (the parser drops ``_total``).
PREEMPTIONS = ("vllm:num_preemptions",)
PREFIX_QUERIES = ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries")
PREFIX_HITS = ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits")
PROMPT_TOKENS = ("vllm:prompt_tokens",)
GENERATION_TOKENS = ("vllm:generation_tokens",)
FINISHED = ("vllm:request_success",)  # label "finished_reason"

LATENCIES = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "queue": ("vllm:request_queue_time_seconds",),
}
"""The latency histograms shown, by stepview's short name."""
ITERATION_TOKENS = ("vllm:iteration_tokens_total",)  # a histogram: one observation per step

_PREFIXES = ("vllm:", "# HELP vllm:", "# TYPE vllm:")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class MetricsPage:
    """One scrape's figures (``None``: the server has no such series)."""

    model: str = ""
    gauges: dict[str, float] = field(default_factory=dict)  # RUNNING[0] etc. -> value
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)
    waiting_by_reason: dict[str, float] | None = None
    finished_by_reason: dict[str, float] | None = None
    ranks: tuple[RankStatus, ...] = ()  # each data-parallel rank's, when there are several

    def gauge(self, names: tuple[str, ...]) -> float | None:
        return _first(self.gauges, names)

    def counter(self, names: tuple[str, ...]) -> float | None:
        return _first(self.counters, names)

    def histogram(self, names: tuple[str, ...]) -> Histogram | None:
        return _first(self.histograms, names)


def _first(found: Mapping[str, T], names: tuple[str, ...]) -> T | None:
    for name in names:
        if name in found:
            return found[name]
    return None


def vllm_lines(text: str) -> str:
    """The page's ``vllm:`` series with their HELP and TYPE lines, nothing else."""
    return "\n".join(line for line in text.splitlines() if line.startswith(_PREFIXES)) + "\n"


def read_page(text: str) -> MetricsPage:
    """The figures of a ``/metrics`` page (``ValueError``: not a Prometheus page)."""
    gauges: dict[str, list[float]] = defaultdict(list)
    counters: dict[str, float] = defaultdict(float)
    by_reason: dict[str, dict[str, float]] = {}
    buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    sums: dict[str, float] = defaultdict(float)
    by_engine: dict[str, dict[str, float]] = defaultdict(dict)  # engine label -> gauges
    model = ""
    for family in text_string_to_metric_families(vllm_lines(text)):
        name, kind = family.name, family.type
        for sample in family.samples:
            labels = sample.labels
            model = model or labels.get("model_name", "")
            if name in WAITING_BY_REASON or name in FINISHED:
                label = "reason" if name in WAITING_BY_REASON else "finished_reason"
                reasons = by_reason.setdefault(name, defaultdict(float))
                reasons[labels.get(label, "")] += sample.value
            elif kind == "gauge":
                gauges[name].append(sample.value)
                by_engine[labels.get("engine", "")][name] = sample.value
            elif kind == "counter" and sample.name.endswith("_total"):
                counters[name] += sample.value
            elif kind == "histogram" and sample.name.endswith("_bucket"):
                buckets[name][float(labels.get("le", "inf"))] += sample.value
            elif kind == "histogram" and sample.name.endswith("_sum"):
                sums[name] += sample.value
    mean_of = set(KV_CACHE_USAGE)
    return MetricsPage(
        model=model,
        gauges={
            name: (sum(values) / len(values) if name in mean_of else sum(values))
            for name, values in gauges.items()
        },
        counters=dict(counters),
        histograms={name: _histogram(found.items(), sums[name]) for name, found in buckets.items()},
        waiting_by_reason=_reasons(by_reason, WAITING_BY_REASON),
        finished_by_reason=_reasons(by_reason, FINISHED),
        ranks=_ranks(by_engine) if len(by_engine) > 1 else (),
    )


def _ranks(by_engine: Mapping[str, Mapping[str, float]]) -> tuple[RankStatus, ...]:
    """Each engine's gauges, by rank (vLLM's ``engine`` label is the rank's number)."""
    numbered = sorted(
        ((int(label), gauges) for label, gauges in by_engine.items() if label.isdigit()),
        key=lambda found: found[0],
    )
    return tuple(
        RankStatus(
            rank,
            True,
            int(_first(gauges, RUNNING) or 0),
            int(_first(gauges, WAITING) or 0),
            _first(gauges, KV_CACHE_USAGE) or 0.0,
        )
        for rank, gauges in numbered
    )


def _reasons(found: dict[str, dict[str, float]], names: tuple[str, ...]) -> dict[str, float] | None:
    for name in names:
        if name in found:
            return dict(found[name])
    return None


def _histogram(buckets: Iterable[tuple[float, float]], total: float) -> Histogram:
    ordered = sorted(buckets)
    if not ordered or not math.isinf(ordered[-1][0]):
        ordered.append((math.inf, ordered[-1][1] if ordered else 0.0))
    return Histogram(tuple(b for b, _ in ordered), tuple(c for _, c in ordered), total)
