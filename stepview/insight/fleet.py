"""Several servers at a glance: one row of figures per server, and which is busiest and idlest.

Each watched server produces its own :class:`StepSnapshot` stream (a ``/metrics`` scrape, or
the plug-in's records through the driver); a fleet row is read off the latest snapshot alone,
so the fleet screen and ``--headless`` need no state of their own and a server that stops
answering is simply a row whose snapshot says DISCONNECTED (``down``), until it is back.

Where the figures come from:

* a server watched through ``/metrics`` (the snapshot has a :class:`ServerWindow`): waiting by
  vLLM's reasons, TTFT percentiles from the histogram window, preemptions in the window;
* a server with the plug-in: waiting by stepview's reasons (:func:`reason_of` of each waiting
  request), TTFT percentiles of the requests finished in the window, and preemptions counted
  on the requests still known (active and recently finished) that were preempted in it.

Tokens per second come from the snapshots' recent steps for both (generated tokens in the
window over the window's seconds seen so far, idle ones included). A server with several
data-parallel ranks also has each rank's running, waiting and KV use (``/metrics``: its
series' ``engine`` label; the plug-in: each rank's records), so that ranks out of balance
behind one address show.

**The imbalance rule** (:func:`mark_imbalance`): among servers that are up (running or idle),
when there are two or more and their waiting counts differ by at least
:data:`WAITING_SPREAD` requests, or their KV cache use by at least :data:`KV_SPREAD`
(25 percentage points), the server with the most load (waiting, then KV use) is marked
``busiest`` and the one with the least ``idlest``. Otherwise no mark: a small difference
between a few servers is noise, not a reason to move traffic.
"""

from __future__ import annotations

import urllib.parse
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from stepview.insight.percentiles import percentile
from stepview.model.latency import request_latency
from stepview.model.server_window import not_vllm
from stepview.model.snapshot import EngineState, RankStatus, RequestState, StepSnapshot
from stepview.model.targets import Labels, label_text

WAITING_SPREAD = 4
"""Waiting requests between the most and the least loaded server that count as imbalance."""
KV_SPREAD = 0.25
"""KV cache use (0..1) between the most and the least loaded server that counts as imbalance."""
BUSIEST, IDLEST = "busiest", "idlest"

_UP = frozenset({EngineState.RUNNING, EngineState.IDLE, EngineState.PAUSED})
_UP_WORDS = frozenset(state.value for state in _UP)
_QUEUED = frozenset({RequestState.WAITING, RequestState.PREEMPTED, RequestState.PENDING})


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One server's figures over the window (``None``: nothing to say yet)."""

    address: str
    state: str  # "running", "idle", "down", "connecting", ...
    model: str = ""
    running: int = 0
    waiting: int = 0
    waiting_by_reason: tuple[tuple[str, int], ...] = ()
    kv_cache_usage: float = 0.0
    tokens_per_s: float | None = None
    ttft_p50: float | None = None
    ttft_p99: float | None = None
    preemptions_per_min: float | None = None
    per_request: bool = False  # the plug-in publishes: Enter shows every request
    ranks: tuple[RankStatus, ...] = ()  # its data-parallel ranks, when it has several
    mark: str = ""  # BUSIEST, IDLEST or ""
    labels: Labels = ()  # where it is listed with labels (file_sd, Prometheus)
    behind: float | None = None  # s its view is behind a plug-in server (None: /metrics)
    read_at: float | None = None  # wall clock of the watch's last read of it (None: never)

    @property
    def up(self) -> bool:
        return self.state in _UP_WORDS


def fleet_row(address: str, snapshot: StepSnapshot, window: float, labels: Labels = ()) -> FleetRow:
    """The row of the server at ``address`` (listed with ``labels``) as of ``snapshot``;
    figures over ``window`` s."""
    state = snapshot.engine_state
    label = {EngineState.DISCONNECTED: "down", EngineState.STARTING: "connecting"}
    counters, server = snapshot.counters, snapshot.server
    row = FleetRow(
        address=address,
        state=label.get(state, state.value),
        model=_served_name(snapshot),
        running=counters.running,
        waiting=counters.waiting,
        kv_cache_usage=counters.kv_cache_usage,
        tokens_per_s=_tokens_per_s(snapshot, window),
        per_request=server is None and snapshot.info.detailed_states,
        ranks=snapshot.ranks if len(snapshot.ranks) > 1 else (),
        labels=labels,
    )
    if state is EngineState.STARTING:
        found = not_vllm(snapshot.phase)  # another program on that port: say what
        if found is not None:
            return replace(row, state="not vLLM", model=found)
        return replace(row, model="")  # a placeholder until the server says
    if server is not None:
        ttft = server.latency("ttft")
        covered = server.covered
        return replace(
            row,
            waiting_by_reason=tuple(sorted(server.waiting_by_reason)),
            ttft_p50=ttft.p50,
            ttft_p99=ttft.p99,
            preemptions_per_min=server.preemptions * 60.0 / covered if covered > 0 else None,
        )
    return replace(row, **_from_requests(snapshot, window))


def _served_name(snapshot: StepSnapshot) -> str:
    """The served model's name, as a watch gives it (``NAME @ ADDRESS``); ``""`` while the
    server has not said (a plug-in server watched without its API names no model)."""
    name, at, _ = snapshot.info.model.rpartition(" @ ")
    return name if at else ""


def _tokens_per_s(snapshot: StepSnapshot, window: float) -> float | None:
    """Generated tokens per second over the window: idle seconds count, where the recent
    steps reach back that far; where they do not (a busy plug-in server makes more steps in
    the window than a snapshot keeps), over the span the steps kept cover."""
    since = snapshot.clock - window
    recent = snapshot.recent
    steps = [step for step in recent if step.clock > since]
    if not steps:
        return None
    if len(steps) == len(recent) and recent[0].step > 1:  # older steps were let go
        span = snapshot.clock - steps[0].clock
        return sum(step.generation_tokens for step in steps[1:]) / span if span > 0 else None
    span = min(window, snapshot.clock)
    return sum(step.generation_tokens for step in steps) / span if span > 0 else None


def _from_requests(snapshot: StepSnapshot, window: float) -> dict[str, Any]:
    """A plug-in server's reasons, TTFT and preemptions, from the requests it published."""
    since = snapshot.clock - window
    reasons = Counter(
        reason.code if (reason := snapshot.reason_of(view)) is not None else "unknown"
        for view in snapshot.active
        if view.state in _QUEUED
    )
    ttfts: list[float] = []
    preempted = sum(view.num_preemptions for view in snapshot.active)
    for view in reversed(snapshot.finished):
        finished = view.timings.finished
        if finished is None or finished <= since:
            break
        preempted += view.num_preemptions
        ttft = request_latency(view).ttft
        if view.state is RequestState.FINISHED and ttft is not None:
            ttfts.append(ttft)
    ttfts.sort()
    covered = min(window, snapshot.clock)
    return {
        "waiting_by_reason": tuple(sorted(reasons.items())),
        "ttft_p50": percentile(ttfts, 0.5) if ttfts else None,
        "ttft_p99": percentile(ttfts, 0.99) if ttfts else None,
        "preemptions_per_min": preempted * 60.0 / covered if covered > 0 else None,
    }


def mark_imbalance(rows: Sequence[FleetRow]) -> list[FleetRow]:
    """``rows`` with the busiest and the idlest marked, when the rule (module docstring)
    says the fleet is out of balance; unmarked otherwise. Down servers take no part."""
    rows = [replace(row, mark="") if row.mark else row for row in rows]
    up = [index for index, row in enumerate(rows) if row.up]
    if len(up) < 2:
        return rows

    def load(index: int) -> tuple[int, float]:
        return rows[index].waiting, rows[index].kv_cache_usage

    waiting = [rows[index].waiting for index in up]
    kv = [rows[index].kv_cache_usage for index in up]
    if max(waiting) - min(waiting) < WAITING_SPREAD and max(kv) - min(kv) < KV_SPREAD:
        return rows
    busiest, idlest = max(up, key=load), min(up, key=load)
    rows[busiest] = replace(rows[busiest], mark=BUSIEST)
    rows[idlest] = replace(rows[idlest], mark=IDLEST)
    return rows


def fleet_record(row: FleetRow) -> dict[str, Any]:
    """One row as a JSON object (``--headless``): the server's ``address`` on each."""
    record: dict[str, Any] = {
        "address": row.address,
        "state": row.state,
        "model": row.model,
        "running": row.running,
        "waiting": row.waiting,
        "waiting_by_reason": dict(row.waiting_by_reason),
        "kv_cache_usage": round(row.kv_cache_usage, 4),
        "generation_tokens_per_s": _round(row.tokens_per_s, 1),
        "ttft_p50_s": _round(row.ttft_p50, 6),
        "ttft_p99_s": _round(row.ttft_p99, 6),
        "preemptions_per_min": _round(row.preemptions_per_min, 2),
        "per_request": row.per_request,
        "mark": row.mark or None,
        "labels": dict(row.labels),
        "behind_s": _round(row.behind, 2),
        "read_at": _round(row.read_at, 3),
    }
    if row.ranks:
        record["ranks"] = [rank_record(rank) for rank in row.ranks]
    return record


def shown_labels(row: FleetRow) -> str:
    """The row's labels as the fleet screen shows them, ``name=value`` words: without
    ``instance`` where it only repeats the address's ``HOST:PORT`` (Prometheus adds it to
    every target), the rest as listed."""
    netloc = urllib.parse.urlsplit(row.address).netloc
    return label_text(tuple(pair for pair in row.labels if pair != ("instance", netloc)))


def rank_record(rank: RankStatus) -> dict[str, Any]:
    """One data-parallel rank as a JSON object, in every ``--headless`` line that has ranks."""
    return {
        "rank": rank.rank,
        "up": rank.connected,
        "running": rank.running,
        "waiting": rank.waiting,
        "kv_cache_usage": round(rank.kv_cache_usage, 4),
    }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
