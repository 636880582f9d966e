"""SVG snapshots of the main views at 80x24 and 120x40, from fixed scenarios.

The apps here read a static source (no driver thread, no clock), render once in
``on_mount`` and have animations off, so each picture is the same on every run. Update with
``pytest tests/ui/test_snapshots.py --snapshot-update`` and look at the SVGs before
committing them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from textual.pilot import Pilot

from stepview.model.snapshot import StepSnapshot
from stepview.testing import scenes, snapshots
from tests.ui.replay_trace import TRACE, recorded_run

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]

Compare = Callable[..., bool]


def check(
    snap_compare: Compare,
    snapshot: StepSnapshot,
    size: tuple[int, int],
    run_before: Callable[[Pilot[None]], Awaitable[None]] | None = None,
) -> None:
    app, _ = scenes.make_app(snapshot)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_loading(snap_compare: Compare, size: tuple[int, int]) -> None:
    check(snap_compare, snapshots.loading(), size)


@pytest.mark.parametrize("size", SIZES)
def test_three_panes_mid_run(snap_compare: Compare, size: tuple[int, int]) -> None:
    check(snap_compare, snapshots.mid_run(), size)


@pytest.mark.parametrize("size", SIZES)
def test_detail_of_a_greedy_request_with_logprobs(
    snap_compare: Compare, size: tuple[int, int]
) -> None:
    check(snap_compare, snapshots.mid_run(), size, scenes.show_detail)


@pytest.mark.parametrize("size", SIZES)
def test_logprob_heatmap_with_the_cursor_on_a_token(
    snap_compare: Compare, size: tuple[int, int]
) -> None:
    check(snap_compare, snapshots.mid_run(), size, scenes.show_heatmap)


def test_fork_form_prefilled(snap_compare: Compare) -> None:
    check(snap_compare, snapshots.mid_run(), (80, 24), scenes.show_fork_form)


@pytest.mark.parametrize("size", SIZES)
def test_form_with_a_validation_error(snap_compare: Compare, size: tuple[int, int]) -> None:
    check(snap_compare, snapshots.mid_run(), size, scenes.show_form_error)


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare: Compare, size: tuple[int, int]) -> None:
    check(snap_compare, snapshots.mid_run(), size, scenes.show_help)


def test_startup_error(snap_compare: Compare) -> None:
    check(snap_compare, snapshots.startup_error(), (80, 24))


# -- looking back: a live run's history, and a replay of the committed trace -----------------


def test_history_banner(snap_compare: Compare) -> None:
    app, _ = scenes.history_app(recorded_run())
    assert snap_compare(app, terminal_size=(80, 24), run_before=scenes.at_step(17))


def test_history_detail(snap_compare: Compare) -> None:
    app, _ = scenes.history_app(recorded_run())
    assert snap_compare(app, terminal_size=(80, 24), run_before=scenes.at_step(17, "enter"))


@pytest.mark.parametrize("step", [6, 17])
def test_replay_paused_at_step(snap_compare: Compare, step: int) -> None:
    app, _ = scenes.replay_app(TRACE)
    assert snap_compare(app, terminal_size=(80, 24), run_before=scenes.at_step(step))


def test_replay_at_the_end(snap_compare: Compare) -> None:
    app, _ = scenes.replay_app(TRACE)
    assert snap_compare(app, terminal_size=(80, 24), run_before=scenes.at_end)


# -- scheduler insight: the preemption story (stepview.testing.story) ---------------------------

INSIGHT_SCENES = [
    pytest.param(scenes.show_strip, id="timeline_strip"),
    pytest.param(scenes.show_step_view, id="step_view"),
    pytest.param(scenes.show_latency, id="latency_panel"),
]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("scene", INSIGHT_SCENES)
def test_insight_view(
    snap_compare: Compare, scene: Callable[[Pilot[None]], Awaitable[None]], size: tuple[int, int]
) -> None:
    app, _ = scenes.story_app()
    assert snap_compare(app, terminal_size=size, run_before=scene)
