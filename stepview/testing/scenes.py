"""The app set up for a repeatable picture, and the key presses that lead to each pictured view.

An app here reads a source that stands still (:mod:`stepview.testing.sources`) or a paused replay,
has animations off and no clock, so what it draws depends only on the snapshots and the keys.
The SVG snapshot tests and ``scripts/screenshots.py`` drive the same scenes, so a README
picture changes only when the UI does.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Sequence

from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from stepview.model.snapshot import StepSnapshot
from stepview.testing.sources import HistorySource, StaticSource
from stepview.testing.story import preemption_story
from stepview.trace.replay import ReplaySource
from stepview.ui.app import StepviewApp

Scene = Callable[[Pilot[None]], Awaitable[None]]


def make_app(snapshot: StepSnapshot, **source_kwargs: bool) -> tuple[StepviewApp, StaticSource]:
    """An app over a static source, set up for repeatable screenshots."""
    source = StaticSource(snapshot, **source_kwargs)
    app = StepviewApp(source, clock=None)
    app.animation_level = "none"
    return app, source


def history_app(snapshots: Sequence[StepSnapshot]) -> tuple[StepviewApp, HistorySource]:
    """A live-looking app whose source has kept every one of ``snapshots``."""
    source = HistorySource(snapshots)
    app = StepviewApp(source, clock=None)
    app.animation_level = "none"
    return app, source


def replay_app(
    trace: str | os.PathLike[str], clock: Callable[[], float] = time.monotonic
) -> tuple[StepviewApp, ReplaySource]:
    """The app over a paused replay of ``trace``: nothing moves until a key says so.

    ``clock`` is the player's (a test can stop it to hold a playback where it is)."""
    source = ReplaySource(trace, start_paused=True, clock=clock)
    app = StepviewApp(source, clock=None)
    app.animation_level = "none"
    return app, source


# -- the key presses that lead to each pictured view ------------------------------------------


def steady_cursors(app: App[None]) -> None:
    """Blinking cursors would make a picture depend on timing."""
    for widget in app.screen.query("Input, TextArea"):
        if isinstance(widget, Input | TextArea):
            widget.cursor_blink = False


async def show_detail(pilot: Pilot[None]) -> None:
    """The Running pane has focus; its second row is u1 (greedy, logprobs)."""
    await pilot.press("down", "enter")
    await pilot.pause()


async def show_heatmap(pilot: Pilot[None]) -> None:
    """u1's detail with the token cursor moved to its ninth generated token (p 41%)."""
    await show_detail(pilot)
    for _ in range(8):
        await pilot.press("right")
    await pilot.pause()


async def show_fork_form(pilot: Pilot[None]) -> None:
    """The add form of a fork of u1 at its fourth token."""
    await show_detail(pilot)
    await pilot.press("right", "right", "right", "f")
    steady_cursors(pilot.app)
    await pilot.pause()


async def show_form_error(pilot: Pilot[None]) -> None:
    """The add-prompt form after submitting with top_p = 1.5."""
    await pilot.press("a", *"Hi")
    top_p = pilot.app.screen.query_one("#field-top_p", Input)
    top_p.focus()
    top_p.value = "1.5"
    await pilot.press("ctrl+s")
    steady_cursors(pilot.app)
    # The error focuses its field, which scrolls the form into view: a picture taken while
    # that scroll is under way differs (seen once beside a loaded machine).
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


async def show_help(pilot: Pilot[None]) -> None:
    await pilot.press("question_mark")
    await pilot.pause()


async def until(pilot: Pilot[None], condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Let the app run until ``condition`` holds (a source thread moves on its own)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)


def at_step(step: int, *then: str) -> Scene:
    """Key presses for a picture at ``step`` (``:``, the number, enter), then keys ``then``."""

    async def go(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, StepviewApp)
        await until(pilot, lambda: app.check_action("goto", ()) is True)  # a step to go to
        await pilot.press("colon", *str(step), "enter")
        await until(pilot, lambda: app.shown is not None and app.shown.step == step)
        await pilot.press(*then)
        await pilot.pause()

    return go


async def at_end(pilot: Pilot[None]) -> None:
    """``>``: the last snapshot of a replay (the engine stopped, every request finished)."""
    app = pilot.app
    assert isinstance(app, StepviewApp)
    await until(pilot, lambda: app.check_action("newest", ()) is True)
    await pilot.press("greater_than_sign")
    await until(pilot, lambda: app.shown is not None and app.shown.engine_state.value == "stopped")
    await pilot.pause()


# -- the scheduler insight views, over the preemption story (stepview.testing.story) -------------


def story_app() -> tuple[StepviewApp, HistorySource]:
    """A live-looking app that kept every step of the story (:mod:`stepview.testing.story`)."""
    return history_app(preemption_story())


async def show_strip(pilot: Pilot[None]) -> None:
    """s1's detail at step 9 (prefilled again after its preemption), the preemption chosen."""
    await at_step(9, "enter")(pilot)
    await pilot.press("comma")
    await pilot.pause()


show_step_view = at_step(6, "v")
"""The step view of step 6: s1 preempted, s3 admitted, the budget mostly prefill."""


async def show_latency(pilot: Pilot[None]) -> None:
    """``t`` at the newest step: every request of the story has finished."""
    await pilot.press("t")
    await pilot.pause()
