"""The compare view (``stepview --replay A --compare B``): two recorded runs on one step clock.

Each run gets a pane: its step, counters (running, waiting, KV cache, tok/s) and its active
requests with what the scheduler gave them. One set of history keys (``[ ] { } < >``, as in
the replay) moves both panes to the same engine step; ``n`` jumps to the first step the runs
scheduled differently, which the status bar names along with A and B. The panes sit side by
side on a wide terminal and stacked on a narrow one (under :data:`SIDE_BY_SIDE_MIN` columns).
Kept out of ``ui/app.py``: it shares the formatting helpers, not the live app's machinery.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Vertical
from textual.widgets import DataTable, Static

from stepview.insight.compare import Comparison, compare_runs
from stepview.insight.compare_report import difference_line
from stepview.model.snapshot import StepSnapshot
from stepview.trace.store import Trace
from stepview.ui.display import one_line, rate_value, throughput
from stepview.ui.plain import PlainStatic, PlainTextApp, literal
from stepview.ui.terminal_driver import driver_class
from stepview.ui.theme import THEME

SIDE_BY_SIDE_MIN = 100
_ROWS = ("request", "state", "sched", "out", "from")


class RunPane(Vertical):
    """One run at one step: a header line of counters over its requests."""

    DEFAULT_CSS = """
    RunPane { border: round $primary; height: 1fr; width: 1fr; }
    RunPane > Static { height: 1; }
    RunPane > DataTable { height: 1fr; }
    """

    def __init__(self, name: str, trace: Trace, *, id: str, shift: int = 0) -> None:
        """``shift``: this run's step s is shown at the compare's step s + shift (aligned)."""
        super().__init__(id=id)
        self.border_title = literal(f"{name}: {Path(trace.path or '?').name}")
        snapshots = trace.snapshots
        self._snapshots: Sequence[StepSnapshot] = snapshots
        self._steps = [snapshots.step_at(i) for i in range(len(snapshots))]
        self._shift = shift

    def compose(self) -> ComposeResult:
        yield Static(id="counters", markup=False)  # figures only
        table: DataTable[str | Text] = DataTable(cursor_type="row", zebra_stripes=True)
        table.add_columns(*_ROWS)
        yield table

    def show(self, step: int) -> None:
        """Show the run after the compare's step ``step`` (its last snapshot at or before it)."""
        step -= self._shift
        index = bisect_right(self._steps, step) - 1
        counters = self.query_one("#counters", Static)
        table = self.query_one(DataTable)
        table.clear()
        if index < 0:
            counters.update(f"step {step}: not started")
            return
        snap = self._snapshots[index]
        c = snap.counters
        ended = " (ended)" if step > self._steps[-1] else ""
        counters.update(
            f"step {snap.step}{ended}  run {c.running}  wait {c.waiting}  "
            f"KV {c.kv_cache_usage:.0%}  tok/s {rate_value(throughput(snap.recent))}"
        )
        for view in snap.active:
            table.add_row(
                literal(view.request_id),
                view.state.value,
                str(view.scheduled_tokens or ""),
                str(view.output_tokens),
                literal(view.lineage.label()) if view.lineage is not None else "",
            )


class CompareApp(PlainTextApp[None]):
    """Two traces side by side; see the module docstring."""

    TITLE = "stepview compare"
    CSS = """
    #panes { layout: horizontal; height: 1fr; overflow: hidden; }
    #panes.stacked { layout: vertical; }
    #status { dock: bottom; height: auto; max-height: 4; background: $panel; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left_square_bracket", "move(-1)", "Prev", key_display="["),
        Binding("right_square_bracket", "move(1)", "Next", key_display="]"),
        Binding("left_curly_bracket", "move(-10)", "Back 10", key_display="{"),
        Binding("right_curly_bracket", "move(10)", "Forward 10", key_display="}"),
        Binding("less_than_sign", "edge(0)", "First", key_display="<"),
        Binding("greater_than_sign,L", "edge(1)", "Last", key_display=">"),
        Binding("n", "difference", "First difference"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, trace_a: Trace, trace_b: Trace, *, aligned: bool = False) -> None:
        """``aligned``: B's steps counted from A's first scheduling step (a rerun's
        comparison, :func:`~stepview.insight.compare.compare_runs`)."""
        # The main app's theme (stepview.ui.theme) and terminal driver (ui.terminal_driver).
        super().__init__(driver_class=driver_class(), ansi_color=True)
        self.theme = THEME
        self._traces = (trace_a, trace_b)
        self.comparison: Comparison = compare_runs(
            trace_a.snapshots, trace_b.snapshots, aligned=aligned
        )
        steps: set[int] = set()
        for trace, shift in zip(self._traces, (0, self.comparison.b_shift), strict=True):
            snaps = trace.snapshots
            steps.update(snaps.step_at(i) + shift for i in range(len(snaps)))
        self.steps = sorted(steps) or [0]
        first = self.comparison.divergence.step
        self.position = self.steps.index(first) if first is not None else 0
        self._names = " ".join(
            f"{label}={one_line(Path(t.path or '?').name)}"
            for label, t in zip("AB", self._traces, strict=True)
        )

    def compose(self) -> ComposeResult:
        with Container(id="panes"):
            yield RunPane("A", self._traces[0], id="pane-a")
            yield RunPane("B", self._traces[1], id="pane-b", shift=self.comparison.b_shift)
        yield PlainStatic(id="status")

    def on_mount(self) -> None:
        self._layout(self.size.width)
        self._show()

    def on_resize(self) -> None:
        self._layout(self.size.width)

    def _layout(self, width: int) -> None:
        self.query_one("#panes").set_class(width < SIDE_BY_SIDE_MIN, "stacked")

    @property
    def step(self) -> int:
        return self.steps[self.position]

    def _show(self) -> None:
        for pane in self.query(RunPane):
            pane.show(self.step)
        divergence = self.comparison.divergence
        # One line each (the ids in it, the names): the status's own line break stays the one.
        line = one_line(
            difference_line(divergence, self.comparison.b_names, self.comparison.b_shift)
        )
        here = " ◆ here" if divergence.step == self.step else ""
        self.query_one("#status", Static).update(
            f"step {self.step}{here} │ {line}\n{self._names} │ [ ] {{ }} < > both · n diff · q"
        )

    def _go(self, position: int) -> None:
        self.position = max(0, min(position, len(self.steps) - 1))
        self._show()

    def action_move(self, delta: int) -> None:
        self._go(self.position + delta)

    def action_edge(self, last: int) -> None:
        self._go(len(self.steps) - 1 if last else 0)

    def action_difference(self) -> None:
        step = self.comparison.divergence.step
        if step is not None:
            self._go(self.steps.index(step))
