"""The add form's chat switch, ``D`` (the demo prompts as chat) and a clone of a chat request,
over the real driver and the fake engine, which applies a plain template
(``<|role|>content`` lines, then ``<|assistant|>``) when it has one, as vLLM's would."""

from __future__ import annotations

from textual.pilot import Pilot
from textual.widgets import Static, Switch

from stepview.engine.driver.loop import Driver
from stepview.model.chat import NO_CHAT_TEMPLATE, ChatMessage
from stepview.model.commands import AddRequest
from stepview.model.prompts import SEED_PROMPTS
from stepview.model.snapshot import RequestState, RequestView
from stepview.testing.fake_engine import FakeEngine
from stepview.testing.scenes import until
from stepview.ui.app import StepviewApp
from stepview.ui.dialogs.add_form import PromptForm
from stepview.ui.main.request_table import RequestTable

SIZE = (100, 30)
TEMPLATED = "<|user|>hi there\n<|assistant|>"


def app_over(chat_template: bool) -> tuple[StepviewApp, Driver]:
    engine = FakeEngine(chat_template=chat_template)
    driver = Driver(lambda phase: engine, start_paused=True)
    return StepviewApp(driver, clock=None), driver


def rows(app: StepviewApp, pane: str) -> list[RequestView]:
    table = app.query_one(f"#{pane}", RequestTable)
    return [table.row(i) for i in range(table.row_count)]


async def started(pilot: Pilot[None], app: StepviewApp) -> None:
    await until(pilot, lambda: app.shown is not None and app.shown.engine_state.value == "paused")


def form_of(app: StepviewApp) -> PromptForm:
    assert isinstance(app.screen, PromptForm)
    return app.screen


def note(form: PromptForm) -> str:
    return str(form.query_one("#chat-note", Static).render())


async def test_chat_switch_sends_a_user_message_and_the_templated_prompt_is_shown() -> None:
    app, driver = app_over(chat_template=True)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await pilot.press("a")
        form = form_of(app)
        switch = form.query_one("#chat", Switch)
        assert not switch.disabled and not switch.value
        await pilot.press(*"hi", "space", *"there")
        await pilot.click("#chat")
        assert switch.value and "chat template is applied" in note(form)
        await pilot.press("ctrl+s")
        await until(pilot, lambda: [v.request_id for v in rows(app, "pending")] == ["u1"])
        [view] = rows(app, "pending")
        assert view.prompt == TEMPLATED  # what the engine runs, not what was typed
        assert view.messages == (ChatMessage("user", "hi there"),)
        assert view.prompt_token_ids == tuple(TEMPLATED.encode())

        # A clone keeps chat on, with the user's text (not the template) in the box.
        app.query_one("#pending", RequestTable).focus()
        await until(pilot, lambda: app.current_request() is not None)
        await pilot.press("c")
        clone = form_of(app)
        assert clone.prompt == "hi there"
        assert clone.query_one("#chat", Switch).value
        await pilot.press("ctrl+s")
        await until(pilot, lambda: len(rows(app, "pending")) == 2)
        assert rows(app, "pending")[1].prompt == TEMPLATED

        await pilot.press("p")  # run both to the end: the messages stay with the request
        await until(pilot, lambda: len(rows(app, "finished")) == 2)
        assert {v.messages for v in rows(app, "finished")} == {view.messages}
        assert {v.prompt for v in rows(app, "finished")} == {TEMPLATED}
        await pilot.press("q")
    assert not driver.alive


async def test_a_model_without_a_chat_template_says_so_and_refuses_chat() -> None:
    app, driver = app_over(chat_template=False)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await pilot.press("a")
        form = form_of(app)
        assert form.query_one("#chat", Switch).disabled
        assert note(form) == NO_CHAT_TEMPLATE
        await pilot.press("escape")

        await pilot.press("D")  # the demo as chat: refused, nothing queued
        await until(pilot, lambda: any(NO_CHAT_TEMPLATE in n.message for n in app._notifications))
        assert rows(app, "pending") == []

        # A chat request sent anyway (a prompts file) ends rejected, saying why.
        messages = (ChatMessage("user", "hi"),)
        driver.send(AddRequest("f1", "", SEED_PROMPTS[0][1], messages=messages))
        await until(pilot, lambda: [v.request_id for v in rows(app, "finished")] == ["f1"])
        [rejected] = rows(app, "finished")
        assert rejected.state is RequestState.REJECTED
        assert rejected.error == NO_CHAT_TEMPLATE
        assert rejected.messages == messages and rejected.prompt == "user: hi"

        await pilot.press("d")  # plain demo prompts still go
        await until(pilot, lambda: len(rows(app, "pending")) == 3)
        assert [v.prompt for v in rows(app, "pending")] == [p for p, _ in SEED_PROMPTS]
        await pilot.press("q")


async def test_capital_d_queues_the_demo_prompts_as_chat() -> None:
    app, _ = app_over(chat_template=True)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await pilot.press("D")
        await until(pilot, lambda: len(rows(app, "pending")) == 3)
        views = rows(app, "pending")
        assert [v.messages for v in views] == [
            (ChatMessage("user", prompt),) for prompt, _ in SEED_PROMPTS
        ]
        assert [v.spec for v in views] == [spec for _, spec in SEED_PROMPTS]
        assert views[0].prompt == f"<|user|>{SEED_PROMPTS[0][0]}\n<|assistant|>"
        await pilot.press("q")
