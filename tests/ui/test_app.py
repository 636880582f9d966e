"""Pilot tests: keys in, commands and visible state out.

Two kinds of source: the static one from :mod:`stepview.demo` when a test is about what a
key sends or what a fixed snapshot shows, and the real :class:`Driver` over the deterministic
:class:`FakeEngine` when a test is about a request moving through the panes.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Static, TextArea

from stepview.engine.driver.loop import Driver
from stepview.model.commands import Abort, AddRequest, Pause, Resume, SingleStep
from stepview.model.prompts import SEED_PROMPTS
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState
from stepview.testing.fake_engine import FakeEngine
from stepview.testing.scenes import make_app, until
from stepview.testing.snapshots import mid_run, request, startup_error
from stepview.ui.app import StepviewApp
from stepview.ui.detail.screen import DetailScreen
from stepview.ui.dialogs.add_form import EMPTY_PROMPT, PromptForm
from stepview.ui.dialogs.help import HelpScreen
from stepview.ui.main.filter_bar import FilterBar
from stepview.ui.main.loading import ErrorScreen
from stepview.ui.main.request_table import RequestTable

SIZE = (80, 24)


def table(app: StepviewApp, pane: str) -> RequestTable:
    return app.query_one(f"#{pane}", RequestTable)


def ids(app: StepviewApp, pane: str) -> list[str]:
    t = table(app, pane)
    return [t.row(i).request_id for i in range(t.row_count)]


def fake_driver(**engine_kwargs: object) -> Driver:
    """A driver over the fake engine, paused so each test decides when steps happen."""
    engine = FakeEngine(**engine_kwargs)  # type: ignore[arg-type]
    return Driver(lambda phase: engine, start_paused=True)


async def type_text(pilot: Pilot[None], text: str) -> None:
    await pilot.press(*["space" if c == " " else c for c in text])


async def fill_field(pilot: Pilot[None], name: str, text: str) -> None:
    field = pilot.app.screen.query_one(f"#field-{name}", Input)
    field.focus()
    field.value = ""
    await type_text(pilot, text)


# -- a request's life through the form and the panes ---------------------------------------


async def test_submitted_prompt_moves_pending_running_finished() -> None:
    driver = fake_driver()
    app = StepviewApp(driver, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(
            pilot, lambda: app.shown is not None and app.shown.engine_state.value == "paused"
        )
        await pilot.press("a")
        assert isinstance(app.screen, PromptForm)
        await type_text(pilot, "hello engine")
        await fill_field(pilot, "max_tokens", "3")
        await pilot.press("ctrl+s")
        assert not isinstance(app.screen, PromptForm)
        await until(pilot, lambda: ids(app, "pending") == ["u1"])
        view = table(app, "pending").row(0)
        assert view.prompt == "hello engine"
        assert view.spec == SamplingSpec(max_tokens=3)

        await pilot.press("s")  # one step: admitted, prefilled, first token
        await until(pilot, lambda: ids(app, "running") == ["u1"])
        assert ids(app, "pending") == []

        await pilot.press("p")  # resume: runs to the end
        await until(pilot, lambda: ids(app, "finished") == ["u1"])
        assert table(app, "finished").row(0).state is RequestState.FINISHED
        await pilot.press("q")
    assert not driver.alive


@pytest.mark.parametrize(
    ("edits", "field", "message"),
    [
        ({"top_p": "1.5"}, "top_p", "top_p must be in (0, 1], got 1.5."),
        ({"temperature": "-1"}, "temperature", "temperature must be non-negative, got -1.0."),
        (
            {"temperature": "0", "n": "2"},
            "n",
            "n must be 1 when using greedy sampling (temperature 0), got 2.",
        ),
        ({"max_tokens": "ten"}, "max_tokens", "max_tokens must be a whole number, got 'ten'."),
        ({"logprobs": "21"}, "logprobs", "logprobs must be at most 20"),
    ],
)
async def test_invalid_value_blocks_submit_and_shows_message_by_the_field(
    edits: dict[str, str], field: str, message: str
) -> None:
    app, source = make_app(mid_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await type_text(pilot, "a prompt")
        for name, value in edits.items():
            await fill_field(pilot, name, value)
        await pilot.press("ctrl+s")
        form = app.screen
        assert isinstance(form, PromptForm)  # still open
        shown = str(form.query_one(f"#error-{field}", Static).render())
        assert message in shown
        assert form.query_one(f"#field-{field}").has_class("-error")
        assert form.query_one(f"#field-{field}").has_focus
        assert source.sent == []
        # Fixing the value clears the message and lets the form through.
        for name in edits:
            await fill_field(pilot, name, {"temperature": "0.5"}.get(name, "1"))
        assert str(form.query_one(f"#error-{field}", Static).render()) == ""
        await pilot.press("ctrl+s")
        assert not isinstance(app.screen, PromptForm)
        assert [type(c) for c in source.sent] == [AddRequest]


async def test_empty_prompt_is_refused_inline() -> None:
    app, source = make_app(mid_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a", "ctrl+s")
        form = app.screen
        assert isinstance(form, PromptForm)
        assert str(form.query_one("#error-prompt", Static).render()) == EMPTY_PROMPT
        assert form.query_one("#prompt", TextArea).has_focus
        assert source.sent == []
        await pilot.press("escape")
        assert not isinstance(app.screen, PromptForm)
        assert source.sent == []


async def test_preset_fills_fields_and_submits_seed_parameters() -> None:
    app, source = make_app(mid_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        form = app.screen
        assert isinstance(form, PromptForm)
        form.apply_preset("n2")
        await pilot.pause()
        assert form.query_one("#field-top_p", Input).value == "0.95"
        await pilot.press("ctrl+s")
        prompt, spec = SEED_PROMPTS[2]
        # u1..u10 exist in the scenario: the new id skips them.
        assert source.sent == [AddRequest("u11", prompt, spec)]


async def test_demo_key_queues_the_three_seed_prompts_with_unique_ids() -> None:
    app, source = make_app(mid_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("d", "d")
        sent = [c for c in source.sent if isinstance(c, AddRequest)]
        assert [(c.prompt, c.spec) for c in sent] == [*SEED_PROMPTS, *SEED_PROMPTS]
        assert len({c.request_id for c in sent}) == 6
        assert not {c.request_id for c in sent} & {v.request_id for v in mid_run().requests()}


# -- pause, step, abort ---------------------------------------------------------------------


async def test_pause_step_abort_send_commands() -> None:
    snap = mid_run()
    app, source = make_app(snap)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")  # not paused: single step is disabled
        assert source.sent == []
        await pilot.press("p")
        assert source.sent == [Pause()]
        source.snapshot = replace(snap, engine_state=EngineState.PAUSED)
        await until(pilot, lambda: app.shown is source.snapshot)
        await pilot.press("s", "p")
        assert source.sent[1:] == [SingleStep(), Resume()]
        # Running pane has focus; its cursor is on the first running request.
        assert app.focused is table(app, "running")
        await pilot.press("down", "x")
        assert source.sent[-1] == Abort("u1")


async def test_abort_of_a_finished_request_is_refused() -> None:
    app, source = make_app(mid_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("tab", "x")  # Finished pane, cursor on the newest (rejected u10)
        assert app.focused is table(app, "finished")
        assert source.sent == []


async def test_pause_step_abort_have_visible_effect() -> None:
    driver = fake_driver(max_num_seqs=2)
    app = StepviewApp(driver, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(
            pilot, lambda: app.shown is not None and app.shown.engine_state.value == "paused"
        )
        for i in range(3):
            driver.send(AddRequest(f"r{i}", "x" * 20, SamplingSpec(max_tokens=50)))
        await until(pilot, lambda: len(ids(app, "pending")) == 3)
        assert app.shown is not None
        step = app.shown.step
        await pilot.press("s")
        await until(pilot, lambda: app.shown is not None and app.shown.step == step + 1)
        # Exactly one step: pausing again changes nothing, but the driver publishes once it
        # has handled it, so a second step would be in (or before) that snapshot.
        stepped = driver.latest()
        driver.send(Pause())
        await until(pilot, lambda: driver.latest() is not stepped and app.shown is driver.latest())
        assert app.shown is not None and app.shown.step == step + 1  # exactly one step
        assert ids(app, "running") == ["r0", "r1"]  # max_num_seqs=2
        assert ids(app, "pending") == ["r2"]
        await pilot.press("x")  # running pane focused: abort r0
        await until(pilot, lambda: ids(app, "finished") == ["r0"])
        assert table(app, "finished").row(0).state is RequestState.ABORTED
        await pilot.press("p")  # resume
        await until(pilot, lambda: app.shown is not None and app.shown.step > step + 3)
        assert "PAUSED" not in str(app.query_one("#status").render())
        await pilot.press("p")
        await until(pilot, lambda: "PAUSED" in str(app.query_one("#status").render()))


# -- detail, filter, help, errors, replay ------------------------------------------------------


async def test_detail_follows_the_request_as_it_streams() -> None:
    snap = mid_run()
    app, source = make_app(snap)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("down", "enter")  # running pane: u1 (greedy, logprobs)
        screen = app.screen
        assert isinstance(screen, DetailScreen) and screen.request_id == "u1"
        body = str(screen.query_one("#detail-body", Static).render())
        assert "A robot may not injure a human being" in body
        assert "logprobs" in body and "Prompt logprobs" in body
        # The next snapshot has one more token: the view is a new object, the text grows.
        grown = request(
            "u1",
            SEED_PROMPTS[0][0],
            RequestState.DECODING,
            spec=SEED_PROMPTS[0][1],
            arrival=8.0,
            scheduled=8.05,
            first_token=8.1,
            prompt_tokens=8,
            computed=8,
            tokens=13,
        )
        active = tuple(grown if v.request_id == "u1" else v for v in snap.active)
        source.snapshot = replace(snap, step=241, active=active)
        await until(pilot, lambda: screen.view is grown)
        assert "13 tokens" in str(screen.query_one("#detail-body", Static).render())
        await pilot.press("escape")
        assert not isinstance(app.screen, DetailScreen)


async def test_filter_by_state_and_text() -> None:
    app, _ = make_app(mid_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash")
        bar = app.query_one(FilterBar)
        assert bar.has_focus
        # Visible, not hidden under the footer.
        assert app.screen.get_widget_at(bar.region.x + 1, bar.region.y)[0] is bar
        await type_text(pilot, "is:aborted")
        assert ids(app, "finished") == ["u8"]
        assert ids(app, "running") == []
        await pilot.press("enter")
        assert app.focused is table(app, "running")  # back where the user was
        assert table(app, "finished").border_title == "Finished 1/4"
        assert app.screen.get_widget_at(bar.region.x + 1, bar.region.y)[0] is bar  # still shown
        await pilot.press("slash", "escape")
        assert ids(app, "finished") == ["u2", "u6", "u8", "u10"]
        assert not bar.display


async def test_filter_key_is_off_outside_the_panes() -> None:
    app, _ = make_app(mid_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter", "slash")
        assert isinstance(app.screen, DetailScreen)
        assert not app.query_one(FilterBar).has_focus


async def test_help_opens_and_closes() -> None:
    app, _ = make_app(mid_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help Static", Static).render())
        assert "Abort the selected request" in text and "Filter" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_startup_failure_shows_error_screen_and_q_quits() -> None:
    app, source = make_app(startup_error())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, ErrorScreen)
        assert "press q to quit" in str(app.screen.query_one("#error-hint", Static).render())
        await pilot.press("escape")  # nothing to go back to before the first step
        assert isinstance(app.screen, ErrorScreen)
        await pilot.press("q")
    assert source.stopped


async def test_replay_source_disables_writing_keys() -> None:
    app, source = make_app(mid_run(), accepts_requests=False)
    notices: list[str] = []
    app.notify = lambda message, **_: notices.append(message)  # type: ignore[method-assign,assignment,misc]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a", "d", "x")
        assert not isinstance(app.screen, PromptForm)
        assert source.sent == []
        assert len(notices) == 3 and all("replay" in n for n in notices)


# -- lifecycle -------------------------------------------------------------------------------


async def test_quit_stops_the_driver_thread_quickly() -> None:
    driver = fake_driver(step_delay=0.2)  # a slow step: quitting may land mid-step
    app = StepviewApp(driver, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        driver.send(AddRequest("r", "hello", SamplingSpec(max_tokens=100)))
        driver.send(Resume())
        await until(pilot, lambda: app.shown is not None and app.shown.step >= 1)
        started = time.monotonic()
        await pilot.press("q")
    assert time.monotonic() - started < 5
    assert not driver.alive


async def test_unchanged_snapshot_costs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    polls: list[None] = []
    poll = StepviewApp.poll

    def counted_poll(self: StepviewApp) -> None:
        polls.append(None)
        poll(self)

    monkeypatch.setattr(StepviewApp, "poll", counted_poll)  # the timer's, bound at mount
    app, source = make_app(mid_run())
    async with app.run_test(size=SIZE) as pilot:
        calls: list[object] = []
        original = app.show_snapshot
        app.show_snapshot = lambda s: (calls.append(s), original(s))  # type: ignore[method-assign]
        ticked = len(polls)
        await until(pilot, lambda: len(polls) >= ticked + 3)  # timer ticks, same snapshot object
        assert calls == []
        source.snapshot = replace(source.snapshot, step=241)
        await until(pilot, lambda: len(calls) == 1)


async def test_rows_never_exceed_the_pane_width() -> None:
    app, _ = make_app(mid_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        for pane in ("pending", "running", "finished"):
            t = table(app, pane)
            width = t.scrollable_content_region.width
            for y in range(t.scrollable_content_region.height):
                assert t.render_line(y).cell_length == width


async def test_filter_follows_requests_that_change_state() -> None:
    snap = mid_run()
    app, source = make_app(snap)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash", *"is:waiting", "enter")
        assert ids(app, "pending") == ["u7"]
        moved = {
            "u9": snap.active[0]._replace(state=RequestState.WAITING),
            "u7": snap.active[1]._replace(state=RequestState.PREFILLING),
        }
        active = tuple(moved.get(v.request_id, v) for v in snap.active)
        source.snapshot = replace(snap, step=241, active=active)
        await until(pilot, lambda: app.shown is source.snapshot)
        assert ids(app, "pending") == ["u9"]
        assert ids(app, "running") == []
        assert table(app, "pending").border_title == "Pending 1/2"
