"""The end-of-run summary as text: a latency table, preemptions and alerts.

Printed on stderr at the end of ``stepview --headless`` (stdout carries the results) and on
stdout by ``stepview --replay TRACE --summary``. It reads the JSON-ready dict of
:meth:`RunInsight.summary <stepview.insight.run.RunInsight.summary>`, so the text and the
data never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stepview.insight.percentiles import METRIC_LABELS, METRICS

_COLUMNS = ("p50", "p90", "p99", "max")
_CELL = 10
_LABEL_WIDTH = max(len(label) for label in METRIC_LABELS.values())


def _figure(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if metric == "decode_rate" else f"{value:.4f}"


def _row(label: str, cells: list[str]) -> str:
    return f"{label:<{_LABEL_WIDTH}}" + "".join(f"{cell:>{_CELL}}" for cell in cells)


def format_summary(summary: Mapping[str, Any]) -> str:
    """The summary as lines of text (no trailing newline)."""
    latency = summary["latency"]
    window = latency["window"]
    recent_count = min(latency["finished"], window or 0)
    lines = [
        f"stepview summary: {summary['steps']} steps, {latency['finished']} requests finished",
        f"{'':<{_LABEL_WIDTH}}{'all finished':>{4 * _CELL}}{f'last {recent_count}':>{2 * _CELL}}",
        _row("", [*_COLUMNS, "p50", "p90"]),
    ]
    for metric in METRICS:
        overall = latency["all"][metric] or {}
        recent = latency["recent"][metric] or {}
        cells = [_figure(metric, overall.get(c)) for c in _COLUMNS]
        cells += [_figure(metric, recent.get(c)) for c in ("p50", "p90")]
        lines.append(_row(METRIC_LABELS[metric], cells))
    sketched = latency.get("sketched")
    if sketched:
        lines.append(
            f"(all finished: {'/'.join(sketched['figures'])} from a {sketched['method']} "
            f"sketch, within ±{sketched['relative_error']:.0%}; max and mean exact)"
        )
    pre = summary["preemptions"]
    lines.append(
        f"preemptions: {pre['count']} ({pre['requests']} requests), "
        f"{pre['tokens_lost']} computed tokens lost"
    )
    alerts = summary["alerts"]
    lines.append(f"alerts: {len(alerts)}" if alerts else "alerts: none")
    lines.extend(f"  step {a['step']}: [{a['kind']}] {a['text']}" for a in alerts)
    return "\n".join(lines)
