"""A vLLM server's Prometheus ``/metrics`` page, read into the figures stepview shows.

Only the families stepview reads (:data:`READ`) are read, picked out by one regular
expression over the page (:func:`read_lines`): the rest of the page (Python's collector, the
HTTP server's histograms, and vLLM's own histograms stepview does not show: prefill, decode
and inference time, tokens per request) is most of its lines, and parsing them was what a
fleet's watch spent most of its time on (16 pages a second at 64 servers). Those lines are
read as ``prometheus_client``'s text parser reads them (:mod:`.page_samples`: a lean reader
for plain text, the parser itself for anything else).

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
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from prometheus_client.parser import text_string_to_metric_families

from stepview.engine.watch.metrics.page_samples import page_samples
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

READ = frozenset((
    *RUNNING, *WAITING, *WAITING_BY_REASON, *KV_CACHE_USAGE, *PREEMPTIONS, *PREFIX_QUERIES,
    *PREFIX_HITS, *PROMPT_TOKENS, *GENERATION_TOKENS, *FINISHED, *ITERATION_TOKENS,
    *(name for names in LATENCIES.values() for name in names),
))  # fmt: skip
"""Every family :func:`read_page` reads: the lines of no other are parsed."""
# A line of a family read: its HELP or TYPE line, or a sample of it (a counter's ``_total``, a
# histogram's ``_bucket``, ``_sum``, ``_count``, and the ``_created`` some clients add),
# followed by its labels or its value.
_READ_LINE = re.compile(
    r"^(?:# (?:HELP|TYPE) )?(?:"
    + "|".join(re.escape(name) for name in sorted(READ, key=len, reverse=True))
    + r")(?:_total|_bucket|_sum|_count|_created)?[{ ].*\n?",
    re.MULTILINE,
)
_VLLM_LINE = re.compile(r"^vllm:", re.MULTILINE)
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


def read_lines(text: str) -> str:
    """The page's lines of the families in :data:`READ` (samples, HELP and TYPE), nothing else."""
    return "".join(_READ_LINE.findall(text.replace("\r\n", "\n"))) + "\n"


class NotVllmMetrics(ValueError):
    """A ``/metrics`` page with no ``vllm:`` series: another program on that port (or vLLM not
    up there yet); the message says what was found instead."""


# What a page without vLLM's series is, by its most common metric name prefix: the programs
# people point --attach at by mistake, a port off (their /metrics pages are all Prometheus text).
EXPORTERS = {
    "stepview": "stepview's own exporter (--metrics-port), not the vLLM server it watches",
    "sglang": "an SGLang server",
    "tgi": "a Text Generation Inference server",
    "DCGM": "NVIDIA's DCGM exporter",
    "node": "node_exporter",
    "prometheus": "Prometheus itself",
}
# Every Go or Python program's client library adds these: they tell only the language.
GENERIC = {"go": "a Go program", "process": "a program", "python": "a Python program"}


def what_is_there(text: str) -> str:
    """What a ``/metrics`` page without ``vllm:`` series holds, in words: ``not Prometheus
    text (an HTML page)``, ``Prometheus text with no vLLM series (it looks like node_exporter)``."""
    head = text.lstrip()[:512].lower()
    if not head:
        return "an empty page"
    if head.startswith(("<!doctype", "<html", "<?xml")) or "<body" in head:
        return "not Prometheus text (an HTML page)"
    if head.startswith(("{", "[")):
        return "not Prometheus text (JSON)"
    try:
        names = [family.name for family in text_string_to_metric_families(text)]
    except (ValueError, IndexError, KeyError):
        return "not Prometheus text"
    if not names:
        return "not Prometheus text"
    prefixes = Counter(re.split(r"[:_]", name, maxsplit=1)[0] for name in names)
    specific = [p for p, _ in prefixes.most_common() if p not in GENERIC]
    guess = EXPORTERS.get(specific[0]) if specific else None
    if guess is None and not specific:
        guess = GENERIC.get(prefixes.most_common(1)[0][0])
    looks = f" (it looks like {guess})" if guess else ""
    return f"Prometheus text with no vLLM series{looks}"


def read_page(text: str) -> MetricsPage:
    """The figures of a ``/metrics`` page (:class:`NotVllmMetrics`: none of vLLM's series;
    ``ValueError``: vLLM's series that do not parse)."""
    lines = read_lines(text)
    if not lines.strip() and _VLLM_LINE.search(text) is None:
        raise NotVllmMetrics(what_is_there(text))
    gauges: dict[str, list[float]] = defaultdict(list)
    counters: dict[str, float] = defaultdict(float)
    by_reason: dict[str, dict[str, float]] = {}
    buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    sums: dict[str, float] = defaultdict(float)
    by_engine: dict[str, dict[str, float]] = defaultdict(dict)  # engine label -> gauges
    model = ""
    for name, kind, sample, labels, value in page_samples(lines):
        if not math.isfinite(value):  # a count of +Inf requests: garbled, not vLLM's
            raise ValueError(f"{sample} is {value}, not a figure")
        model = model or labels.get("model_name", "")
        if name in WAITING_BY_REASON or name in FINISHED:
            label = "reason" if name in WAITING_BY_REASON else "finished_reason"
            reasons = by_reason.setdefault(name, defaultdict(float))
            reasons[labels.get(label, "")] += value
        elif kind == "gauge":
            gauges[name].append(value)
            by_engine[labels.get("engine", "")][name] = value
        elif kind == "counter" and sample.endswith("_total"):
            counters[name] += value
        elif kind == "histogram" and sample.endswith("_bucket"):
            buckets[name][float(labels.get("le", "inf"))] += value
        elif kind == "histogram" and sample.endswith("_sum"):
            sums[name] += value
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
