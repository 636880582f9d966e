"""Hand-made snapshots for the metrics tests: a run's active views through one builder, so
consecutive snapshots share their unchanged chunks as the driver's do."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stepview.metrics.exporter import MetricsExporter
from stepview.model.active import ActiveBuilder
from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import WaitReason
from stepview.model.snapshot import (
    EngineCounters,
    EngineState,
    RequestState,
    RequestView,
    StepSnapshot,
    Timings,
)


def view(
    request_id: str,
    state: RequestState = RequestState.WAITING,
    *,
    reason: str | None = None,
    queue: int = 0,
    arrival: float = 0.0,
    **fields: Any,
) -> RequestView:
    """A request in ``state``, with a reason of its own when ``reason`` names one."""
    return RequestView(
        request_id,
        "a prompt",
        SamplingSpec(max_tokens=8),
        state,
        Timings(arrival),
        wait_reason=None if reason is None else WaitReason(reason, f"{reason} (own)"),
        queue=queue,
        **fields,
    )


class Run:
    """Snapshots of one run: requests added, changed and removed between steps."""

    def __init__(self) -> None:
        self.builder = ActiveBuilder()
        self.views: dict[str, RequestView] = {}

    def add(self, *views: RequestView) -> None:
        for v in views:
            self.builder.append(v)
            self.views[v.request_id] = v

    def change(self, request_id: str, **fields: Any) -> None:
        old = self.views[request_id]
        new = self.views[request_id] = old._replace(**fields)
        self.builder.set(old, new)

    def remove(self, *request_ids: str) -> None:
        for request_id in request_ids:
            self.builder.remove(self.views.pop(request_id))

    def snapshot(self, step: int, clock: float = 10.0, **fields: Any) -> StepSnapshot:
        waiting = sum(
            1
            for v in self.views.values()
            if v.state in (RequestState.WAITING, RequestState.PREEMPTED)
        )
        fields.setdefault("counters", EngineCounters(waiting=waiting))
        return StepSnapshot(
            step, clock, EngineState.RUNNING, active=self.builder.freeze(), **fields
        )


def waiting(exporter: MetricsExporter, rank: str = "0") -> dict[str, float]:
    """``stepview_waiting_requests`` of one rank, by reason, as a scrape would read it."""
    out: dict[str, float] = {}
    for family in exporter.metrics.registry.collect():
        if family.name == "stepview_waiting_requests":
            for sample in family.samples:
                if sample.labels["rank"] == rank:
                    out[sample.labels["reason"]] = sample.value
    return out


def nonzero(counts: dict[str, float]) -> dict[str, float]:
    return {reason: count for reason, count in counts.items() if count}


def value(exporter: MetricsExporter, name: str, **labels: str) -> float | None:
    return exporter.metrics.registry.get_sample_value(name, labels)


def feed(exporter: MetricsExporter, snapshots: Iterable[StepSnapshot]) -> None:
    for snapshot in snapshots:
        exporter.on_snapshot(snapshot, ())
