"""``--export-csv``: one row per request with its timings, for a spreadsheet or pandas.

The results file (JSONL) keeps everything about a request; a load test wants the numbers
side by side: when each request arrived, was scheduled, got its first token and finished,
and the latencies between, as :mod:`stepview.model.latency` defines them for the panes and
the latency panel too. A row is made from a request's results record
(:func:`~stepview.files.records.request_record`), whether that record comes from a view in
memory (the last snapshot of a live run, or of a replayed trace) or from the results file a
run wrote as it went: a run longer than memory keeps (model.recent) exports every request
from its results file, in the same columns. Times are seconds on the driver's clock (0 =
engine start); a column is empty where the request never got there.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from stepview.files.records import request_record
from stepview.model.snapshot import StepSnapshot

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


def csv_row(record: Mapping[str, Any]) -> list[str]:
    """One request's results record as the :data:`COLUMNS`' values; finish reasons of n > 1
    samples joined with ``/`` in sample order (``length/stop``)."""
    t = record["timings"]
    completions = record.get("completions") or []
    reasons = [c["finish_reason"] for c in completions if c.get("finish_reason")]
    return [
        str(record["id"]),
        str(record["state"]),
        _seconds(t.get("arrival")),
        _seconds(t.get("scheduled")),
        _seconds(t.get("first_token")),
        _seconds(t.get("finished")),
        _seconds(t.get("queue_time")),
        _seconds(t.get("ttft")),
        _seconds(t.get("e2e")),
        str(record.get("prompt_tokens", 0)),
        str(sum(len(c.get("token_ids") or ()) for c in completions)),
        str(record.get("num_preemptions", 0)),
        "/".join(reasons),
    ]


def write_csv(path: Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Write a header and one row per request, in order of arrival; the number of rows.

    Raises ``OSError`` when the file cannot be written.
    """
    rows = sorted((csv_row(r) for r in records), key=lambda row: float(row[2] or "inf"))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    return len(rows)


def export_snapshot(path: Path, snapshot: StepSnapshot) -> int:
    """Every request of ``snapshot`` (finished and still active) as CSV rows."""
    return write_csv(path, (request_record(view) for view in snapshot.requests()))


def export_results(path: Path, results: Path, offset: int = 0) -> int:
    """Every request a run wrote to its results file (from byte ``offset`` on: where the run
    began appending) as CSV rows; a line that is not a record (cut short) is skipped.

    Raises ``OSError`` when a file cannot be read or written.
    """
    return write_csv(path, _records(results, offset))


def _records(results: Path, offset: int) -> Iterator[Mapping[str, Any]]:
    with open(results, "rb") as handle:
        handle.seek(offset)
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "id" in record and "timings" in record:
                yield record
