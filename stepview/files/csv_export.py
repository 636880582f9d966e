"""``--export-csv``: one row per request with its timings, for a spreadsheet or pandas.

The results file (JSONL) keeps everything about a request; a load test wants the numbers
side by side: when each request arrived, was scheduled, got its first token and finished,
and the latencies between, as :mod:`stepview.model.latency` defines them for the panes and
the latency panel too. One function writes them from any snapshot (the last of a live run,
or of a replayed trace), so both give the same columns. Times are seconds on the driver's
clock (0 = engine start); a column is empty where the request never got there.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

from stepview.model.latency import request_latency
from stepview.model.snapshot import RequestView, StepSnapshot

COLUMNS = (
    "id",
    "state",
    "arrival",
    "scheduled",
    "first_token",
    "finished",
    "queue_time",
    "ttft",
    "e2e",
    "prompt_tokens",
    "output_tokens",
    "preemptions",
    "finish_reason",
)


def _seconds(value: float | None) -> str:
    """A time or a span as 6 decimals; empty where the request never got there."""
    return "" if value is None else f"{value:.6f}"


def csv_row(view: RequestView) -> list[str]:
    """One request as the :data:`COLUMNS`' values; finish reasons of n > 1 samples joined
    with ``/`` in sample order (``length/stop``)."""
    t = view.timings
    lat = request_latency(view)  # no clock: in flight, a figure not reached yet is empty
    reasons = [c.finish_reason for c in view.completions if c.finish_reason]
    return [
        view.request_id,
        view.state.value,
        _seconds(t.arrival),
        _seconds(t.scheduled),
        _seconds(t.first_token),
        _seconds(t.finished),
        _seconds(lat.queue),
        _seconds(lat.ttft),
        _seconds(lat.e2e),
        str(view.prompt_tokens),
        str(view.output_tokens),
        str(view.num_preemptions),
        "/".join(reasons),
    ]


def write_csv(path: Path, requests: Iterable[RequestView]) -> int:
    """Write a header and one row per request, in order of arrival; the number of rows.

    Raises ``OSError`` when the file cannot be written.
    """
    ordered = sorted(requests, key=lambda view: view.timings.arrival)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerows(csv_row(view) for view in ordered)
    return len(ordered)


def export_snapshot(path: Path, snapshot: StepSnapshot) -> int:
    """Every request of ``snapshot`` (finished and still active) as CSV rows."""
    return write_csv(path, snapshot.requests())
