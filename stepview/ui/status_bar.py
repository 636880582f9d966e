"""The two lines at the top: which engine, what it is doing, and how the last steps went.

Everything comes from the shown snapshot (``counters`` for this step, ``recent`` for the
sparklines), so the bar shows the same figures live and in a replay, and a snapshot test
sees fixed text. It is re-rendered only when the shown snapshot changes.
"""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget

from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.ui.format import (
    one_line,
    percent,
    rate,
    seconds,
    sparkline,
    step_throughputs,
    throughput,
)

STATE_STYLES = {
    EngineState.STARTING: "bold $secondary",
    EngineState.RUNNING: "bold $success",
    EngineState.IDLE: "bold $text-muted",
    EngineState.PAUSED: "bold $warning",
    EngineState.ERROR: "bold $error",
    EngineState.STOPPED: "bold $text-muted",
}
_SPARK_MAX = 40


class StatusBar(Widget):
    """Model, engine state, step, queue sizes, KV cache, throughput and step time."""

    DEFAULT_CSS = """
    StatusBar {
        height: 2;
        padding: 0 1;
    }
    """

    def __init__(self, *, replay: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.replay = replay
        self._snapshot: StepSnapshot | None = None

    def show(self, snapshot: StepSnapshot) -> None:
        if snapshot is not self._snapshot:
            self._snapshot = snapshot
            self.refresh()

    def render(self) -> Content:
        snap = self._snapshot
        if snap is None:
            return Content("stepview")
        width = self.content_region.width
        return Content("\n").join([self._first_line(snap, width), self._second_line(snap, width)])

    def _first_line(self, snap: StepSnapshot, width: int) -> Content:
        right = Content.assemble(
            ("REPLAY ", "bold $warning") if self.replay else "",
            (snap.engine_state.value.upper(), STATE_STYLES[snap.engine_state]),
            f"  step {snap.step}",
        )
        left = Content.assemble(
            ("stepview ", "bold"), one_line(snap.info.label, 200) or "model not known yet"
        )
        left = left.truncate(max(0, width - right.cell_length - 1), ellipsis=True)
        gap = max(1, width - left.cell_length - right.cell_length)
        return Content.assemble(left, " " * gap, right)

    def _second_line(self, snap: StepSnapshot, width: int) -> Content:
        counters = snap.counters
        recent = snap.recent
        fixed = [
            ("run ", f"{counters.running:<3}"),
            ("wait ", f"{counters.waiting:<4}"),
            ("KV ", f"{percent(counters.kv_cache_usage):>4} "),
            ("", f"{rate(throughput(recent)):>11} "),
            ("batch ", ""),
            ("step ", seconds(snap.step_time) if snap.step else "-"),
        ]
        fixed_len = sum(len(a) + len(b) + 1 for a, b in fixed)
        spark = max(0, min(_SPARK_MAX, (width - fixed_len) // 3))
        max_seqs = snap.info.max_num_seqs or None
        sparks = {
            2: sparkline([s.kv_cache_usage for s in recent], spark, top=1.0),
            3: sparkline(step_throughputs(recent), spark),
            4: sparkline([float(s.running) for s in recent], spark, top=max_seqs),
        }
        parts: list[str | tuple[str, str]] = []
        for i, (name, value) in enumerate(fixed):
            parts += [(name, "$text-muted"), value]
            if i in sparks:
                parts.append((sparks[i].ljust(spark), "$accent"))
            parts.append(" ")
        return Content.assemble(*parts).truncate(width)
