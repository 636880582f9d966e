"""Text another party chose is shown as written, never read as Textual markup.

A request id a client chose, a trace someone sent (its file name, its notes), a fleet's
listing and its errors, what the user types into a form or a filter: read as markup, a
``[@click=app.quit]`` became a link that runs an action, ``[reverse]`` restyled the text, and
a tag that does not parse (``evil[/x]``) raised ``MarkupError`` and ended the app. Each case
drives the real app and reads what it draws.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from textual.app import App
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Input, Static
from textual.widgets._toast import Toast

from stepview.model.lineage import Lineage, LineageKind
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState, RequestView, StepSnapshot, Timings
from stepview.testing.scenes import make_app, replay_app, until
from stepview.testing.snapshots import mid_run
from stepview.trace.reader import load_trace
from stepview.ui.compare.app import CompareApp, RunPane
from stepview.ui.detail.screen import DetailScreen
from stepview.ui.dialogs.add_form import PromptForm
from stepview.ui.fleet.fleet_app import FleetApp
from tests.trace.runs import write_trace
from tests.ui.fleet.test_fleet_members_app import A, Changing, member, notified, problem_line

CRASH = "evil[/x]"  # a closing tag that matches nothing: MarkupError
ACTION = "[@click=app.quit]"  # an action link (a file name can hold it: no slash)
CLICK = f"{ACTION}click[/]"
STYLED = "[reverse]x[/reverse]"
LINK = "[link=http://e]l[/link]"  # does not parse either (the URL's colon)


def drawn(widget: Widget) -> str:
    """What the screen shows where ``widget`` is (its border and titles too), as plain text."""
    x, y, width, height = widget.region
    strips = widget.screen._compositor.render_strips()
    return "\n".join(strip.crop(x, x + width).text for strip in strips[y : y + height])


async def toasts(app: App[Any], pilot: Pilot[Any]) -> list[str]:
    """The text of each toast on screen, once there is one (a toast is mounted later)."""
    await until(pilot, lambda: bool(app.screen.query(Toast)))
    return [toast.render().plain for toast in app.screen.query(Toast)]


def messages(app: App[Any]) -> list[str]:
    return [notification.message for notification in app._notifications]


async def test_a_request_id_in_toasts_titles_and_the_clone_form() -> None:
    request_id = CLICK + CRASH
    snap = mid_run()
    active = tuple(
        view._replace(request_id=request_id) if view.request_id == "u1" else view
        for view in snap.active
    )
    app, _ = make_app(replace(snap, active=active))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await pilot.press("down", "x")  # the Running pane's second row, aborted
        await pilot.pause()
        assert messages(app) == [f"abort sent for {request_id}"]
        assert any(f"abort sent for {request_id}" in toast for toast in await toasts(app, pilot))
        await pilot.press("enter")
        assert isinstance(app.screen, DetailScreen)
        assert f"Request {request_id}" in drawn(app.screen.query_one("#detail-scroll"))
        await pilot.press("c")
        form = app.screen
        assert isinstance(form, PromptForm)
        assert f"Clone {request_id}" in drawn(form.query_one("#form"))
        # What the user types comes back in the field's message.
        form.query_one("#field-temperature", Input).value = CRASH
        await pilot.pause()
        assert f"'{CRASH}'." in drawn(form.query_one("#error-temperature"))


async def test_a_compare_shows_the_traces_names_and_ids_as_written(tmp_path: Path) -> None:
    parent = RequestView(CRASH, "p", SamplingSpec(), RequestState.DECODING, Timings(0.0))
    clone = parent._replace(request_id=STYLED, lineage=Lineage(LINK, LineageKind.CLONE))
    run = [
        StepSnapshot(step=1, clock=1.0, engine_state=EngineState.RUNNING, active=(parent, clone))
    ]
    a, b = tmp_path / f"{ACTION}a.trace.jsonl", tmp_path / "b.trace.jsonl"
    write_trace(a, run)
    write_trace(b, run)
    app = CompareApp(load_trace(a), load_trace(b))
    async with app.run_test(size=(200, 30)):
        pane = drawn(app.query_one("#pane-a", RunPane))
        assert f"A: {ACTION}a.trace.jsonl" in pane
        assert CRASH in pane and STYLED in pane and f"clone of {LINK}" in pane
        assert f"A={ACTION}a.trace.jsonl" in drawn(app.query_one("#status", Static))


async def test_a_traces_note_is_a_toast_as_written(tmp_path: Path) -> None:
    path = tmp_path / "part2.trace.jsonl"
    steps = [StepSnapshot(step=1, clock=1.0, engine_state=EngineState.RUNNING)]
    write_trace(path, steps, {"part": 2, "previous": [LINK, CRASH]})
    app, source = replay_app(path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until(pilot, lambda: bool(messages(app)))
        await pilot.pause()
        assert f"Before it: {LINK}, {CRASH}." in messages(app)[0]
        assert any(f"{LINK}, {CRASH}" in toast for toast in await toasts(app, pilot))
    source.stop()


async def test_a_fleets_notices_problems_and_filter_are_shown_as_written() -> None:
    roster = Changing(member(A))
    joined = f"{A} joined (listed by targets.json: zone={STYLED} {CRASH})"
    roster.told = [joined]
    roster.trouble = (f"targets.json: {LINK}",)
    app = FleetApp(roster, window=60.0)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        assert await notified(app, pilot, 1) == [joined]
        assert any(joined in toast for toast in await toasts(app, pilot))
        assert problem_line(app) == f"targets.json: {LINK}"
        await pilot.press("slash", *CRASH)
        await pilot.pause()
        assert f"match “{CRASH}”" in drawn(app.query_one("#fleet-title", Static))
