"""The compare view: two recorded runs (fake engine, ``max_num_seqs`` 4 against 2) on one
step clock; the history keys move both, ``n`` finds the first difference."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.widgets import DataTable, Static

from stepview.testing.snapshots import mid_run
from stepview.testing.sources import StaticSource
from stepview.trace.reader import load_trace
from stepview.ui.app import StepviewApp
from stepview.ui.compare.app import CompareApp, RunPane
from stepview.ui.theme import THEME
from tests.helpers import DATA

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]


def _app() -> CompareApp:
    return CompareApp(
        load_trace(DATA / "compare_a.trace.jsonl"), load_trace(DATA / "compare_b.trace.jsonl")
    )


def _counters(app: CompareApp, pane: str) -> str:
    return str(app.query_one(f"#{pane} #counters", Static).render())


async def test_keys_move_both_runs_to_the_same_step() -> None:
    app = _app()
    async with app.run_test(size=(120, 40)) as pilot:
        first = app.comparison.divergence.step
        assert first == 1 and app.step == first  # opens where the runs part
        status = str(app.query_one("#status", Static).render())
        assert "A=compare_a.trace.jsonl B=compare_b.trace.jsonl" in status
        assert "first scheduling difference: step 1" in status
        a_rows = app.query_one("#pane-a", RunPane).query_one(DataTable).row_count
        assert a_rows == 6
        await pilot.press("right_curly_bracket")
        await pilot.pause()
        assert app.step == 11
        assert _counters(app, "pane-a").startswith("step 11")
        assert _counters(app, "pane-b").startswith("step 11")
        await pilot.press("greater_than_sign")
        await pilot.pause()
        assert app.step == app.steps[-1]
        assert "(ended)" in _counters(app, "pane-a")  # A needed fewer steps than B
        await pilot.press("n")
        await pilot.pause()
        assert app.step == first
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert app.step < first


async def test_narrow_terminals_stack_the_runs() -> None:
    app = _app()
    async with app.run_test(size=(80, 24)):
        assert app.query_one("#panes").has_class("stacked")
    app = _app()
    async with app.run_test(size=(120, 40)):
        assert not app.query_one("#panes").has_class("stacked")


async def test_the_compare_view_wears_the_main_apps_theme() -> None:
    # It opened in Textual's default true-colour theme: a different look from the app it
    # comes from, and blends that tmux and ssh cannot draw.
    app = _app()
    async with app.run_test(size=(80, 24)):
        assert app.theme == THEME == StepviewApp(StaticSource(mid_run()), clock=None).theme
        assert app.ansi_color


@pytest.mark.parametrize("size", SIZES)
def test_compare_view_snapshot(snap_compare: Callable[..., bool], size: tuple[int, int]) -> None:
    assert snap_compare(_app(), terminal_size=size)
