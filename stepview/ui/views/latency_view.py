"""The latency panel (``t``): how long finished requests took, as percentiles and a histogram.

It answers "is it slow for everyone, or for a few?": p50/p90/p99/max of queue time, TTFT,
inter-token latency, end-to-end latency and decode tokens/s, over every request finished by
the step on screen and over the recent window (the last
:data:`~stepview.insight.percentiles.RECENT_WINDOW`), from :mod:`stepview.insight.percentiles`. The
per-request figures are :mod:`stepview.model.latency`'s, the ones the panes show. The
chosen metric (``↑``/``↓``) is drawn as a histogram with Textual's ``Sparkline``.

The figures are recomputed only when the shown snapshot's list of finished requests changes
(the history keys move it back and forth like everything else).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Sparkline, Static

from stepview.insight.percentiles import METRICS, QUANTILES, LatencyStats
from stepview.model.recent import total_of
from stepview.model.snapshot import StepSnapshot
from stepview.ui.display import aligned, rate_value, seconds
from stepview.ui.footer import FittingFooter

_MUTED: Final = "$text-muted"
_COLUMNS: Final = (*(name for name, _ in QUANTILES), "max")
_LABEL_WIDTH: Final = 18
_PLAIN: Final = "$foreground"
# The table's own labels: its figures carry their units (``850ms``), the insight's say "(s)".
LABELS: Final = {
    "queue": "queue time",
    "ttft": "TTFT",
    "itl": "inter-token",
    "e2e": "end-to-end",
    "decode_rate": "decode tok/s",
}
_CELL: Final = 7
_Part = str | tuple[str, str]


def figure(metric: str, value: float | None) -> str:
    """A latency as ``850ms``/``1.23s``; a rate as ``45.2``/``1.3k`` (tokens per second)."""
    if value is None:
        return "-"
    return rate_value(value) if metric == "decode_rate" else seconds(value)


def latency_table(summary: dict[str, Any], chosen: str) -> Content:
    """Rows per metric: the quantiles over all finished requests, then over the recent ones."""
    window = summary["window"]
    span = _CELL * len(_COLUMNS)
    parts: list[_Part] = [
        *aligned(f"{summary['finished']} finished", _LABEL_WIDTH, "bold", left=True),
        (f"{'─ all ':─<{span - 1}}", "bold $primary"),
        "  ",
        (f"{f'─ last {window} ':─<{span - 1}}", "bold $primary"),
        "\n",
        " " * _LABEL_WIDTH,
    ]
    for scope in ("all", "recent"):
        for column in _COLUMNS:
            parts += aligned(column, _CELL, _MUTED)
        parts.append(" " if scope == "all" else "\n")
    for metric in METRICS:
        marker = "▶ " if metric == chosen else "  "
        style = "bold reverse" if metric == chosen else "bold"
        parts += [(f"{marker}{LABELS[metric]}".ljust(_LABEL_WIDTH - 1), style), " "]
        for scope in ("all", "recent"):
            dist = summary[scope][metric]
            for column in _COLUMNS:
                value = None if dist is None else dist[column]
                parts += aligned(figure(metric, value), _CELL, _PLAIN)
            parts.append(" " if scope == "all" else "\n")
    return Content.assemble(*parts)


def histogram_caption(summary: dict[str, Any], metric: str) -> Content:
    """Which metric the histogram shows, its range and its tallest bin."""
    bins = summary["histograms"][metric]
    if not bins["counts"]:
        return Content.styled(f"{LABELS[metric]}: no finished request has it", _MUTED)
    low, high = bins["edges"][0], bins["edges"][-1]
    return Content.assemble(
        (f"Histogram of {LABELS[metric]}", "bold $primary"),
        " ",
        (f"{figure(metric, low)} to {figure(metric, high)}", _MUTED),
        " ",
        (f"{len(bins['counts'])} bins, tallest {max(bins['counts'])}", _MUTED),
    )


class LatencyScreen(Screen[None]):
    """Latency percentiles of the finished requests, kept current by the app."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,t", "app.pop_screen", "Back"),
        Binding("down,j", "metric(1)", "Next metric", tooltip="Histogram of the next metric"),
        Binding("up,k", "metric(-1)", "Previous metric", show=False),
    ]

    def __init__(self, snapshot: StepSnapshot) -> None:
        super().__init__()
        self._snapshot = snapshot
        self._counted = -1
        self._summary: dict[str, Any] = {}
        self.metric = "ttft"
        self._where = ""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="latency-scroll"):
            yield Static(id="latency-table")
            yield Static(id="latency-caption")
            yield Sparkline([], id="latency-histogram")
        yield FittingFooter()

    def on_mount(self) -> None:
        scroll = self.query_one("#latency-scroll")
        scroll.border_title = "Latency of finished requests"
        scroll.border_subtitle = self._where or "↑ ↓ metric · esc back"
        self._render_latency()

    def show_snapshot(self, snapshot: StepSnapshot) -> None:
        self._snapshot = snapshot
        if self.is_mounted:
            self._render_latency()

    def show_where(self, text: str) -> None:
        if text != self._where:
            self._where = text
            if self.is_mounted:
                self.query_one("#latency-scroll").border_subtitle = text or "↑ ↓ metric"

    def action_metric(self, delta: int) -> None:
        self.metric = METRICS[(METRICS.index(self.metric) + delta) % len(METRICS)]
        self._render_latency(force=True)

    def _render_latency(self, *, force: bool = False) -> None:
        finished = self._snapshot.finished
        if total_of(finished) != self._counted:  # it only grows: its total says it all
            self._counted = total_of(finished)
            self._summary = LatencyStats.of(finished).summary()
        elif not force:
            return
        summary = self._summary
        self.query_one("#latency-table", Static).update(latency_table(summary, self.metric))
        self.query_one("#latency-caption", Static).update(histogram_caption(summary, self.metric))
        counts = summary["histograms"][self.metric]["counts"]
        self.query_one("#latency-histogram", Sparkline).data = [float(c) for c in counts]
