"""``--export-chrome-trace OUT.json``: the run's Chrome trace, written.

What the file holds is worked out in :mod:`stepview.insight.chrome_trace` (analysis only);
here it is written, compact, in one go at the end of a run or from a replayed trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from stepview.insight.chrome_trace import chrome_trace
from stepview.insight.counters import CounterPoint
from stepview.insight.timeline import TimelineTracker


def write_chrome_trace(path: Path, trace: dict[str, Any]) -> int:
    """Write ``trace`` as compact JSON; the number of request tracks.

    Raises ``OSError`` when the file cannot be written.
    """
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(trace, handle, separators=(",", ":"), ensure_ascii=False)
        handle.write("\n")
    requests: int = trace["otherData"]["requests"]
    return requests


def export_timelines(
    path: Path, tracker: TimelineTracker, points: Iterable[CounterPoint], title: str
) -> int:
    """:func:`~stepview.insight.chrome_trace.chrome_trace` written to ``path``; the number
    of request tracks."""
    return write_chrome_trace(path, chrome_trace(tracker, list(points), title=title))
