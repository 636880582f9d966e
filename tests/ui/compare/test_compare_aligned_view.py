"""The compare view of a rerun: aligned, it opens where the recording (from step 812) and the
rerun (from step 1) part, each pane showing its run at its own step."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from stepview.trace.reader import load_trace
from stepview.ui.compare.app import CompareApp
from tests.insight.test_compare_aligned import STEPS, run
from tests.trace.runs import write_trace


async def test_each_pane_shows_its_own_step_of_the_aligned_runs(tmp_path: Path) -> None:
    a, b = tmp_path / "flight.jsonl", tmp_path / "rerun.jsonl"
    write_trace(a, run(812, STEPS))
    write_trace(b, run(1, [*STEPS[:2], {"r1": 1}, {"r1": 1, "r2": 1}]))
    app = CompareApp(load_trace(a), load_trace(b), aligned=True)
    async with app.run_test(size=(120, 40)):
        assert app.step == 814  # opens where they part
        counters = [
            str(app.query_one(f"#{pane} #counters", Static).render())
            for pane in ("pane-a", "pane-b")
        ]
        assert counters[0].startswith("step 814") and counters[1].startswith("step 3"), counters
        status = str(app.query_one("#status", Static).render())
        assert "first scheduling difference: step 814 (B's step 3)" in status
