"""The two lines at the top: which engine, what it is doing, and how the last steps went.

Everything comes from the shown snapshot (``counters`` for this step, ``recent`` for the
sparklines) and its mark (history or replay position, see ``scrub.py``), so the bar shows the
same figures live and in a replay, and a snapshot test sees fixed text. It is re-rendered
only when the shown snapshot or the mark changes.

Attached to a server (``stepview --attach``), the first line says when the server is lost
(``DISCONNECTED from ADDRESS — reconnecting``, where the model usually is) and that pausing
only holds the view; with several data-parallel ranks the second line ends with each rank's
own figures (``r1 3/1 12%``: running/waiting, KV cache; ``r1 lost`` while it is away).
While the run has alerts (a request thrashing, the engine stalled: ``snapshot.alerts``), the
first line leads with the latest one instead of the model (``⚠ r7 thrashing: ... (+1)``).

Each figure reads label first (``tok/s 338 ▁▂▃``). Gaps between figures are plain spaces
between two styled runs, never the start of a run: SVG renderers such as librsvg drop the
leading spaces of a text run, which made screenshots read ``RUNNINGstep 240``.
"""

from __future__ import annotations

import os

from textual.content import Content
from textual.widget import Widget

from stepview.model.alerts import Alert
from stepview.model.flight import FlightDump
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.ui.display import (
    one_line,
    percent,
    rate_value,
    seconds,
    sparkline,
    step_throughputs,
    throughput,
)
from stepview.ui.scrub import HistoryMark, Mark, ReplayMark, speed_text

STATE_STYLES = {
    EngineState.STARTING: "bold $secondary",
    EngineState.RUNNING: "bold $success",
    EngineState.IDLE: "bold $text-muted",
    EngineState.PAUSED: "bold $warning",
    EngineState.ERROR: "bold $error",
    EngineState.STOPPED: "bold $text-muted",
    EngineState.DISCONNECTED: "bold $error",
}
_SPARK_MAX = 40
_MUTED = "$text-muted"
# Plain text, but as a span of its own, so the gap before it stays a separate run.
_PLAIN = "$foreground"
_Part = tuple[str, str]
_GROUP_GAP = "  "


def _spaced(*parts: _Part) -> Content:
    """Styled ``parts`` with one plain space between them (see the module docstring).

    Every part needs a style of its own (:data:`_PLAIN` for plain text): a plain part would
    merge with the space before it into one run that starts with a space.
    """
    return Content(" ").join(Content.styled(text, style) for text, style in parts)


def _grouped(*groups: Content) -> Content:
    """Groups of parts, two spaces apart."""
    return Content(_GROUP_GAP).join(groups)


def home_short(path: str) -> str:
    """``path`` with the home directory as ``~``: the data directory's paths are long."""
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if home != "/" and path.startswith(home + os.sep) else path


def alert_text(alerts: tuple[Alert, ...]) -> str:
    """The latest alert, and how many others hold: one short line."""
    more = f" (+{len(alerts) - 1})" if len(alerts) > 1 else ""
    return f"⚠ {one_line(alerts[-1].text, 120)}{more}"


class StatusBar(Widget):
    """Model, engine state, step, queue sizes, KV cache, throughput and step time."""

    DEFAULT_CSS = """
    StatusBar {
        height: 2;
        padding: 0 1;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._snapshot: StepSnapshot | None = None
        self._mark: Mark = None
        self._flight: FlightDump | None = None

    def show_flight(self, dump: FlightDump) -> None:
        """Name the flight recording while it is being written (``--flight-recorder``)."""
        self._flight = dump
        self.refresh()

    def show(self, snapshot: StepSnapshot, mark: Mark = None) -> None:
        """Show ``snapshot``, read as ``mark`` says (live, history or replay)."""
        if snapshot is not self._snapshot or mark != self._mark:
            self._snapshot, self._mark = snapshot, mark
            self.refresh()

    def render(self) -> Content:
        snap = self._snapshot
        if snap is None:
            return Content("stepview")
        width = self.content_region.width
        return Content("\n").join([self._first_line(snap, width), self._second_line(snap, width)])

    def _first_line(self, snap: StepSnapshot, width: int) -> Content:
        """Model (or the history banner, or a damaged trace's warning) left; state right."""
        mark = self._mark
        state_parts: list[_Part] = [
            (snap.engine_state.value.upper(), STATE_STYLES[snap.engine_state])
        ]
        if snap.engine_state is EngineState.PAUSED and snap.info.attached:
            state_parts.append(("view held", _MUTED))  # the server it watches runs on
        state = _spaced(*state_parts)
        arrivals = snap.arrivals
        if arrivals.total:  # a load (or timed prompts) on its way: "load 12/40 arrived"
            done = arrivals.arrived == arrivals.total
            count = (f"{arrivals.arrived}/{arrivals.total} arrived", _MUTED if done else "bold")
            state = _grouped(_spaced(("load", _MUTED), count), state)
        # A /metrics watch has no step of its own: it counts its scrapes.
        step = _spaced(("scrape" if snap.server else "step", _MUTED), (str(snap.step), "bold"))
        left = _spaced(
            ("stepview", "bold"), (one_line(snap.info.label, 200) or "model not known yet", _PLAIN)
        )
        if isinstance(mark, HistoryMark):
            left = _grouped(
                _spaced(
                    ("HISTORY", "bold reverse $warning"),
                    (f"step {snap.step}", "bold"),
                    (f"of {mark.latest_step}", _MUTED),
                ),
                _spaced(("L", "bold $secondary"), ("= live", _MUTED)),
            )
            right = state
        elif isinstance(mark, ReplayMark):
            if mark.status.warning:
                left = _spaced(("⚠ " + one_line(mark.status.warning, 200), "bold $error"))
            elif snap.alerts:  # recorded in the trace: shown as the live run showed them
                left = _spaced((alert_text(snap.alerts), "bold $warning"))
            playing = f"{mark.symbol} {speed_text(mark.status.speed)}"
            step = _spaced(("step", _MUTED), (mark.position(snap.step), "bold"))
            right = _grouped(_spaced(("REPLAY", "bold $warning"), (playing, "bold")), state, step)
        else:
            right = _grouped(state, step)
            if snap.engine_state is EngineState.DISCONNECTED:  # the state leads, on the left
                left = _spaced(("⚠ " + one_line(snap.phase or "DISCONNECTED", 200), "bold $error"))
                right = step
            elif snap.alerts:
                left = _spaced((alert_text(snap.alerts), "bold $warning"))
            elif snap.info.attached and snap.phase and snap.engine_state is EngineState.RUNNING:
                left = _spaced(("⚠ " + one_line(snap.phase, 200), "bold $warning"))  # behind
        flight = self._flight
        if flight is not None and flight.open and not isinstance(mark, ReplayMark):
            folder, name = os.path.split(flight.path)  # the name first: the folder may not fit
            where = _spaced(
                ("✈ flight", "bold $warning"), (name, _PLAIN), (f"in {home_short(folder)}", _MUTED)
            )
            left = _grouped(where, left)
        left = left.truncate(max(0, width - right.cell_length - 1), ellipsis=True)
        gap = max(1, width - left.cell_length - right.cell_length)
        return Content.assemble(left, " " * gap, right)

    def _second_line(self, snap: StepSnapshot, width: int) -> Content:
        """``wait 3  tok/s 338 ▁▂▃  batch 5 ▁▂▃  KV 62% ▁▂▃  hit 40%  pre 0  step 5ms``.

        Each label first. ``hit`` is the prefix cache's hit rate over the run (vLLM's
        cumulative queries and hits), ``pre`` the preemptions in this step (in the warning
        colour when there are any): the two figures that say the KV cache is the bottleneck.
        """
        counters = snap.counters
        queries = counters.prefix_cache_queries
        hit = percent(counters.prefix_cache_hits / queries) if queries else "-"
        recent = snap.recent
        # (label, value, width the value is padded to, sparkline values, sparkline top)
        figures: list[tuple[str, str, int, list[float] | None, float | None]] = [
            ("wait", str(counters.waiting), 3, None, None),
            ("tok/s", rate_value(throughput(recent)), 4, step_throughputs(recent), None),
            (
                "batch",
                str(counters.running),
                2,
                [float(s.running) for s in recent],
                snap.info.max_num_seqs or None,
            ),
            (
                "KV",
                percent(counters.kv_cache_usage),
                4,
                [s.kv_cache_usage for s in recent],
                1.0,
            ),
            ("hit", hit, 3, None, None),
            ("pre", str(counters.preemptions), 1, None, None),
            ("step", seconds(snap.step_time) if snap.step else "-", 5, None, None),
        ]
        if snap.server is not None:  # the mean engine step is not on the page; their rate is
            rate = snap.server.steps_per_s
            figures[-1] = ("steps/s", "-" if rate is None else f"{rate:.0f}", 3, None, None)
        for rank in snap.ranks:
            if rank.connected:
                value = f"{rank.running}/{rank.waiting} {percent(rank.kv_cache_usage)}"
            else:
                value = "lost"
            figures.append((f"r{rank.rank}", value, 0, None, None))
        sparks = sum(values is not None for _, _, _, values, _ in figures)
        fixed = sum(len(label) + 1 + max(pad, len(value)) for label, value, pad, _, _ in figures)
        fixed += sparks + len(_GROUP_GAP) * (len(figures) - 1)
        spark = max(0, min(_SPARK_MAX, (width - fixed) // sparks))
        groups = []
        for label, value, pad, values, top in figures:
            alarm = label == "pre" and counters.preemptions > 0
            parts = [(label, _MUTED), (value.ljust(pad), "bold $warning" if alarm else _PLAIN)]
            if values is not None:
                parts.append((sparkline(values, spark, top=top).ljust(spark), "$accent"))
            groups.append(_spaced(*parts))
        return _grouped(*groups).truncate(width)
