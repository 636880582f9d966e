"""Clone and fork: keys in, a prefilled add form, and an ``AddRequest`` that names its parent.

The static source of :mod:`stepview.demo` records what the app sends; ``mid_run`` has u5 first
in the Running pane and u1 (greedy, logprobs and prompt logprobs, 12 tokens) second.
"""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Input, Static, TextArea

from stepview.model.commands import AddRequest
from stepview.model.lineage import Lineage, LineageKind
from stepview.model.prompts import SEED_PROMPTS
from stepview.model.sampling import form_values
from stepview.testing.scenes import make_app
from stepview.testing.snapshots import WORDS, mid_run
from stepview.ui.detail.screen import DetailScreen
from stepview.ui.dialogs.add_form import PromptForm
from stepview.ui.main.request_table import RequestTable

SIZE = (80, 24)
U1_PROMPT, U1_SPEC = SEED_PROMPTS[0]


def form_of(app: object) -> PromptForm:
    screen = app.screen  # type: ignore[attr-defined]
    assert isinstance(screen, PromptForm)
    return screen


async def test_clone_from_a_pane_prefills_the_form_and_sends_the_parent() -> None:
    snap = mid_run()
    app, source = make_app(snap)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down")  # Running pane: u1
        await pilot.press("c")
        form = form_of(app)
        assert form.prompt == U1_PROMPT
        assert form.values() == form_values(U1_SPEC)
        assert form.query_one("#form").border_title == "Clone u1"
        # The B of an A/B pair: another temperature, the same prompt.
        temperature = form.query_one("#field-temperature", Input)
        temperature.value = "0.7"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not isinstance(app.screen, PromptForm)
    [sent] = source.sent
    assert isinstance(sent, AddRequest)
    assert sent.prompt == U1_PROMPT
    assert sent.spec.temperature == 0.7 and sent.spec.logprobs == U1_SPEC.logprobs
    assert sent.lineage == Lineage("u1", LineageKind.CLONE)
    assert snap.find(sent.request_id) is None  # a fresh id


async def test_clone_from_the_detail_view() -> None:
    app, source = make_app(mid_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "enter", "c")
        assert form_of(app).prompt == U1_PROMPT
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)  # back where the clone was asked for
    assert [c.lineage for c in source.sent] == [Lineage("u1", LineageKind.CLONE)]  # type: ignore[union-attr]


async def test_fork_prompt_is_the_prompt_plus_the_completion_up_to_the_cursor() -> None:
    app, source = make_app(mid_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "enter")
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        assert screen.cursor == (0, 0)  # the first generated token
        await pilot.press("right", "right", "right")
        assert screen.cursor == (0, 3)
        await pilot.press("f")
        form = form_of(app)
        expected = U1_PROMPT + "".join(WORDS[:4])  # tokens 0..3: " the engine steps tokens"
        assert form.prompt == expected
        assert form.values() == form_values(U1_SPEC)
        assert form.query_one("#form").border_title == "Fork u1 @ token 3"
        assert form.query_one("#prompt", TextArea).cursor_location == (0, len(expected))
        await pilot.press("ctrl+s")
        await pilot.pause()
    [sent] = source.sent
    assert isinstance(sent, AddRequest)
    assert sent.prompt == expected
    assert sent.lineage == Lineage("u1", LineageKind.FORK, completion=0, token=3)


async def test_fork_is_dimmed_on_a_prompt_token() -> None:
    app, source = make_app(mid_run())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "enter", "left")  # from token 0 back into the prompt's
        screen = app.screen
        assert isinstance(screen, DetailScreen) and screen.cursor is not None
        assert screen.cursor[0] is None
        assert screen.check_action("fork", ()) is None
        await pilot.press("f")
        assert not isinstance(app.screen, PromptForm)
    assert source.sent == []


async def test_a_clone_shows_its_parent_in_the_detail_view() -> None:
    snap = mid_run()
    u1 = snap.find("u1")
    assert u1 is not None
    fork = u1._replace(request_id="u11", lineage=Lineage("u1", LineageKind.FORK, 0, 17))
    app, _ = make_app(replace(snap, active=(*snap.active, fork)))
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("down", "down", "down", "enter")
        screen = app.screen
        assert isinstance(screen, DetailScreen) and screen.request_id == "u11"
        body = str(screen.query_one("#detail-body", Static).render())
        assert "u11  fork of u1 @ token 17" in body
        await pilot.press("escape")
        row = app.query_one("#running", RequestTable).render_line(4).text  # after the header
        assert "u11" in row and "fork of u1 @ token 17" in row


async def test_clone_and_fork_explain_that_a_replay_takes_no_requests() -> None:
    app, source = make_app(mid_run(), accepts_requests=False)
    notices: list[str] = []
    app.notify = lambda message, **_: notices.append(message)  # type: ignore[method-assign,assignment,misc]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")  # over a pane
        await pilot.press("down", "enter")
        shown = {b.binding.action for b in app.screen.active_bindings.values() if b.binding.show}
        assert "fork" not in shown and "clone" not in shown
        await pilot.press("c", "f")  # over the detail view
        assert isinstance(app.screen, DetailScreen)
    assert source.sent == []
    assert len(notices) == 3 and all("replay" in n for n in notices)
