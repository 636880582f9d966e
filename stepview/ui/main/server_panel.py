"""A server watched through its ``/metrics`` alone: what the window says, where the panes were.

``stepview --attach http://HOST:PORT`` has no request to list (the page counts, it does not
name), so the three panes make way for this panel: why requests wait now (vLLM's reasons),
what finished and how fast over the window (latency percentiles from the server's histograms),
and, once, how to restart this very server with stepview's plug-in for the per-request view.
Everything comes from the shown snapshot's :class:`~stepview.model.server_window.ServerWindow`.
"""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget

from stepview.model.server_window import KvBlocks, Latency, ServerWindow
from stepview.ui.display import one_line, percent, seconds

LATENCY_NAMES = {
    "ttft": "time to first token",
    "itl": "inter-token",
    "e2e": "end to end",
    "queue": "queued",
}
_MUTED = "$text-muted"
_LABEL = 22  # the width of the labels' column


class ServerPanel(Widget):
    """The window's figures and the plug-in's restart line; hidden for any other source."""

    DEFAULT_CSS = """
    ServerPanel {
        padding: 1 1 0 1;
        border-top: solid $primary;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._window: ServerWindow | None = None

    def show(self, window: ServerWindow | None) -> bool:
        """Show ``window``; whether there is one (the panel is then shown, not the panes)."""
        if window != self._window:
            self._window = window
            self.refresh()
        return window is not None

    def render(self) -> Content:
        window = self._window
        if window is None:
            return Content("")
        return Content("\n").join(panel_lines(window))


def _row(label: str, *parts: tuple[str, str]) -> Content:
    return Content.assemble((label.ljust(_LABEL), _MUTED), *parts)


def panel_lines(window: ServerWindow) -> list[Content]:
    """The panel, line by line."""
    span = f"{window.span:g} s"
    seen = "" if window.covered >= window.span else f" (watched {window.covered:.0f} s so far)"
    lines = [
        Content.assemble(
            ("Server ", "bold"),
            (window.address, "bold"),
            (f"  /metrics · the last {span}{seen}", _MUTED),
        ),
        Content(""),
    ]
    if window.waiting_by_reason:
        reasons = "   ".join(f"{reason} {count}" for reason, count in window.waiting_by_reason)
        lines.append(_row("waiting, by reason", (reasons, "")))
    else:
        lines.append(_row("waiting, by reason", ("not reported by this vLLM", _MUTED)))
    finished = ", ".join(f"{reason} {count}" for reason, count in window.finished)
    lines.append(
        _row(
            "finished",
            (f"{window.finished_in_window} in the window", "bold"),
            (f" ({finished})" if finished else "", ""),
            (f" · {window.finished_total} since the server started", _MUTED),
        )
    )
    hit = "-" if window.prefix_hit_rate is None else percent(window.prefix_hit_rate)
    steps = "-" if window.steps_per_s is None else f"{window.steps_per_s:.1f}"
    alarm = "bold $warning" if window.preemptions else ""
    lines.append(
        _row(
            "preemptions",
            (str(window.preemptions), alarm),
            ("   prefix-cache hits ", _MUTED),
            (hit, ""),
            ("   engine steps/s ", _MUTED),
            (steps, ""),
        )
    )
    if window.kv_blocks is not None:
        lines += kv_lines(window.kv_blocks)
    lines.append(Content(""))
    lines.append(_row("latency", ("     p50      p90      p99   observed", _MUTED)))
    for latency in window.latencies:
        lines.append(_latency_row(latency))
    if window.plugin_hint:
        lines += [
            Content(""),
            Content.styled(
                "No per-request view: this server runs without stepview's plug-in. "
                "To see each request, restart it with the plug-in (and its other flags) "
                "and watch that:",
                "bold",
            ),
            *(
                Content.styled(f"  {one_line(line)}", "$accent")  # it quotes the server's names
                for line in window.plugin_hint.splitlines()
            ),
        ]
    return lines


def kv_lines(kv: KvBlocks) -> list[Content]:
    """Two rows from the server's KV events: churn and residency, then reuse (in blocks)."""
    if not kv.batches:
        return [_row("KV blocks", (f"no KV events from {kv.address} yet", _MUTED))]
    share = kv.reuse_share
    notes = [
        f"{count} {what}"
        for count, what in (
            (kv.missed, "batches missed"),
            (kv.restarts, "restarts"),
            (kv.clears, "cache clears"),
        )
        if count
    ]
    return [
        _row(
            "KV blocks",
            (f"+{kv.stored_per_s:.1f}/s", "bold"),
            (" stored  ", _MUTED),
            (f"-{kv.removed_per_s:.1f}/s", "bold"),
            (" evicted  ", _MUTED),
            (str(kv.resident), ""),
            (" resident", _MUTED),
            (f"   ({', '.join(notes)})" if notes else "", "$warning"),
        ),
        _row(
            "prefix reuse (events)",
            (str(kv.reused), "bold"),
            (" blocks reused, ", _MUTED),
            (str(kv.stored), ""),
            (" computed", _MUTED),
            (f"  = {percent(share)} reused" if share is not None else "", ""),
            (f"   {kv.recomputed} recomputed after eviction" if kv.recomputed else "", _MUTED),
        ),
    ]


def _latency_row(latency: Latency) -> Content:
    cells = "".join(f"{seconds(v) if v is not None else '-':>9}" for v in latency[1:4])
    return _row(
        LATENCY_NAMES.get(latency.name, latency.name),
        (cells, ""),
        (f"{latency.observed:>11}", _MUTED),
    )
