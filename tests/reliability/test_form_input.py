"""Bad input in the add-prompt form never crashes stepview and never reaches the engine broken.

Pilot tests on the real :class:`Driver` over a :class:`FaultyEngine` that keeps every
``add_request`` call. Each numeric field gets a negative, an out-of-range, a non-numeric,
an empty, a non-finite ("1e400") and a 40-digit value: the form either names the problem
beside the field and refuses to submit, or (for values vLLM takes) submits them unchanged.
Prompts the engine must judge (too long) come back as rejected requests with the engine's
message; prompts full of control characters, emoji and right-to-left text reach the engine
byte for byte and are drawn without a raw control character or a row of the wrong width.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Iterable

import pytest
from textual.geometry import Region
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widgets import Input, Static, TextArea

from stepview.model.commands import AddRequest
from stepview.model.sampling import FORM_FIELDS, SamplingSpec, form_values, parse_form
from stepview.model.snapshot import EngineState, RequestState
from stepview.testing.scenes import until
from stepview.ui.app import StepviewApp
from stepview.ui.detail.screen import DetailScreen
from stepview.ui.dialogs.add_form import EMPTY_PROMPT, PromptForm
from stepview.ui.main.request_table import RequestTable
from tests.reliability.faults import (
    SIZE,
    FaultyEngine,
    driver_for,
    leftovers,
    new_app,
    running_now,
)

NUMERIC = tuple(name for name in FORM_FIELDS if name != "stop")
FLOATS = {
    "temperature",
    "top_p",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
}
OPTIONAL = {"seed", "logprobs", "prompt_logprobs"}
FORTY_DIGITS = "1234567890" * 4
OK = None  # the value is valid: no message, the form submits it

# field -> (value, message) for a value outside the field's range; vLLM's wording.
OUT_OF_RANGE: dict[str, tuple[str, str | None]] = {
    "temperature": ("2.5", "temperature must be in [0, 2], got 2.5."),
    "top_p": ("1.5", "top_p must be in (0, 1], got 1.5."),
    "top_k": ("100000", OK),  # larger than the vocabulary: vLLM takes it (all tokens)
    "min_p": ("1.5", "min_p must be in [0, 1], got 1.5."),
    "max_tokens": ("100000", OK),  # the request ends at max_model_len instead
    "n": ("16385", "n must be at most 16384, got 16385."),
    # vLLM 0.32 accepts this seed and then fails the whole step (every request) on it.
    "seed": ("18446744073709551616", "seed must be between -2**63 and 2**64-1, got"),
    "presence_penalty": ("2.5", "presence_penalty must be in [-2, 2], got 2.5."),
    "frequency_penalty": ("-2.5", "frequency_penalty must be in [-2, 2], got -2.5."),
    "repetition_penalty": ("0", "repetition_penalty must be greater than zero, got 0.0."),
    "logprobs": ("21", "logprobs must be at most 20 (the engine's max_logprobs), got 21."),
    "prompt_logprobs": ("21", "prompt_logprobs must be at most 20"),
}

NEGATIVE: dict[str, str | None] = {
    "temperature": "temperature must be non-negative, got -5.0.",
    "top_p": "top_p must be in (0, 1], got -5.0.",
    "top_k": "top_k must be 0 (disable), or at least 1, got -5.",
    "min_p": "min_p must be in [0, 1], got -5.0.",
    "max_tokens": "max_tokens must be at least 1, got -5.",
    "n": "n must be at least 1, got -5.",
    "seed": OK,  # torch takes negative seeds
    "presence_penalty": "presence_penalty must be in [-2, 2], got -5.0.",
    "frequency_penalty": "frequency_penalty must be in [-2, 2], got -5.0.",
    "repetition_penalty": "repetition_penalty must be greater than zero, got -5.0.",
    "logprobs": "logprobs must be non-negative or -1, got -5.",
    "prompt_logprobs": "prompt_logprobs must be non-negative or -1, got -5.",
}


def entered(name: str, text: str) -> object:
    """What the spec holds for ``text`` entered in field ``name``."""
    if text == "":
        return None if name in OPTIONAL else getattr(SamplingSpec(), name)
    return float(text) if name in FLOATS else int(text)


def number_message(name: str, text: str, finite: bool = False) -> str:
    if name in FLOATS:
        what = "a finite number" if finite else "a number"
        return f"{name} must be {what}, got {text!r}."
    return f"{name} must be a whole number, got {text!r}."


CASES: dict[str, dict[str, tuple[str, str | None]]] = {
    "negative": {name: ("-5", NEGATIVE[name]) for name in NUMERIC},
    "out-of-range": OUT_OF_RANGE,
    "non-numeric": {name: ("ten", number_message(name, "ten")) for name in NUMERIC},
    # Empty means vLLM's default for a required field and "not set" for an optional one.
    "empty": {name: ("", OK) for name in NUMERIC},
    "1e400": {name: ("1e400", number_message(name, "1e400", finite=True)) for name in NUMERIC},
    "40 digits": {
        name: (FORTY_DIGITS, f"{name}: value is too long to be a number.") for name in NUMERIC
    },
}


async def type_text(pilot: Pilot[None], text: str) -> None:
    """Type ``text`` key by key (newlines as enter)."""
    keys = {" ": "space", "\n": "enter"}
    await pilot.press(*[keys.get(c, c) for c in text])


async def fill(pilot: Pilot[None], name: str, text: str) -> None:
    """Focus field ``name``, clear it and enter ``text``.

    A number field gets the text as one paste (the pilot spends ~0.1 s on each key press,
    and these tests enter some 400 values); the stop field is typed key by key.
    """
    field = pilot.app.screen.query_one(f"#field-{name}")
    field.focus()
    if isinstance(field, TextArea):
        field.clear()
        await type_text(pilot, text)
    elif isinstance(field, Input):
        field.value = ""
        field.insert_text_at_cursor(text)
    await pilot.pause()  # the form re-validates on the Changed message


def message_of(form: PromptForm, name: str) -> str:
    return str(form.query_one(f"#error-{name}", Static).render())


async def message_after(pilot: Pilot[None], form: PromptForm, name: str, expected: str) -> str:
    """Field ``name``'s message once it holds ``expected`` (``""``: once it is empty), or
    after 5 s, for the caller's assertion to name: the Changed message bubbles through four
    containers, and a pause may come back before the form has re-validated on a busy machine."""
    deadline = time.monotonic() + 5
    while True:
        shown = message_of(form, name)
        if (expected in shown if expected else shown == "") or time.monotonic() > deadline:
            return shown
        await pilot.pause(0.02)


async def open_form(pilot: Pilot[None], app_prompt: str = "a prompt") -> PromptForm:
    app = pilot.app
    await until(pilot, lambda: app.screen is app.screen_stack[0] and _state(pilot) == "idle")
    await pilot.press("a")
    form = app.screen
    assert isinstance(form, PromptForm)
    if app_prompt:
        await type_text(pilot, app_prompt)
    return form


def _state(pilot: Pilot[None]) -> str:
    app = pilot.app
    assert isinstance(app, StepviewApp)
    return "" if app.shown is None else app.shown.engine_state.value


@pytest.mark.parametrize("kind", list(CASES))
async def test_every_numeric_field_refuses_bad_values_inline(kind: str) -> None:
    before = running_now()
    engine = FaultyEngine()
    driver = driver_for(engine)
    app = new_app(driver)
    accepted: dict[str, str] = {}
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot)
        defaults = form.values()
        for name, (text, message) in CASES[kind].items():
            await fill(pilot, name, text)
            shown = await message_after(pilot, form, name, "" if message is OK else message)
            if message is OK:
                assert shown == "", f"{name}={text!r}: {shown}"
                accepted[name] = text
            else:
                assert message in shown, f"{name}={text!r}: {shown!r}"
                assert form.query_one(f"#field-{name}").has_class("-error")
                await pilot.press("ctrl+s")  # refused: the form stays, the field has focus
                assert app.screen is form
                assert form.query_one(f"#field-{name}").has_focus
            form.set_values({name: defaults[name]})
            assert await message_after(pilot, form, name, "") == ""
        # Every value the form took goes to the engine in one request, unchanged.
        form.set_values(accepted)
        await pilot.press("ctrl+s")
        assert app.screen is not form
        await until(pilot, lambda: len(engine.added) == 1)
        ((_, _, spec),) = engine.added
        for name, text in accepted.items():
            assert getattr(spec, name) == entered(name, text), name
        await until(pilot, lambda: _finished_states(pilot) == [RequestState.FINISHED])
        await pilot.press("q")
    assert not driver.alive
    assert leftovers(before) == []


def _finished_states(pilot: Pilot[None]) -> list[RequestState]:
    table = pilot.app.query_one("#finished", RequestTable)
    return [table.row(i).state for i in range(table.row_count)]


async def test_n_larger_than_the_batch_runs_and_n_over_vllms_limit_is_refused() -> None:
    engine = FaultyEngine(max_num_seqs=2)
    driver = driver_for(engine)
    app = new_app(driver)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot)
        await fill(pilot, "n", "16385")
        message = "n must be at most 16384, got 16385."
        assert await message_after(pilot, form, "n", message) == message
        await fill(pilot, "n", "5")  # more samples than the engine runs at once
        await fill(pilot, "max_tokens", "4")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: _finished_states(pilot) == [RequestState.FINISHED])
        view = pilot.app.query_one("#finished", RequestTable).row(0)
        assert [c.index for c in view.completions] == [0, 1, 2, 3, 4]
        assert all(len(c.token_ids) == 4 for c in view.completions)
        await pilot.press("q")
    assert not driver.alive


async def test_stop_strings_with_quotes_newlines_and_unicode_reach_the_engine_intact() -> None:
    engine = FaultyEngine()
    driver = driver_for(engine)
    app = new_app(driver)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot)
        # One stop string per line; \n in a line is a line break, \\ a backslash.
        await fill(pilot, "stop", '"it\'s" done\n\\n\\n\né🚀 ünï\n C:\\\\dir ')
        assert message_of(form, "stop") == ""
        await pilot.press("ctrl+s")
        await until(pilot, lambda: len(engine.added) == 1)
        await until(pilot, lambda: _finished_states(pilot) == [RequestState.FINISHED])
        await pilot.press("q")
    ((_, _, spec),) = engine.added
    assert spec.stop == ('"it\'s" done', "\n\n", "é🚀 ünï", " C:\\dir ")


async def test_prompt_longer_than_max_model_len_is_rejected_with_the_engines_message() -> None:
    engine = FaultyEngine(max_model_len=64)
    driver = driver_for(engine)
    app = new_app(driver)
    async with app.run_test(size=SIZE) as pilot:
        await open_form(pilot, app_prompt="")
        app.screen.query_one("#prompt", TextArea).load_text("word " * 40)  # pasted
        await pilot.press("ctrl+s")
        await until(pilot, lambda: _finished_states(pilot) == [RequestState.REJECTED])
        finished = app.query_one("#finished", RequestTable)
        finished.focus()
        await pilot.press("enter")
        detail = app.screen
        assert isinstance(detail, DetailScreen)
        body = str(detail.query_one("#detail-body", Static).render())
        assert "rejected" in body
        assert "longer than the maximum model length of 64" in body
        # The engine goes on serving others.
        await pilot.press("escape", "a")
        await type_text(pilot, "short")
        await pilot.press("ctrl+s")
        await until(
            pilot,
            lambda: _finished_states(pilot) == [RequestState.REJECTED, RequestState.FINISHED],
        )
        await pilot.press("q")
    assert not driver.alive


async def test_empty_and_blank_prompts_are_refused_inline() -> None:
    engine = FaultyEngine()
    driver = driver_for(engine)
    app = new_app(driver)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot, app_prompt="")
        await pilot.press("ctrl+s")
        assert app.screen is form
        assert message_of(form, "prompt") == EMPTY_PROMPT
        await type_text(pilot, "  \n\t ")  # only white space is empty too
        await pilot.press("ctrl+s")
        assert app.screen is form
        assert message_of(form, "prompt") == EMPTY_PROMPT
        assert form.query_one("#prompt", TextArea).has_focus
        await pilot.press("escape")
        assert app.screen is not form
        await pilot.press("q")
    assert engine.added == []
    assert driver.latest().finished == ()


# Clear screen, colour and a window title (escape sequences), NUL, tab, a bidi override that
# would reverse the row, emoji with joiners, Hebrew, Arabic, a line break.
HOSTILE_PROMPT = (
    "start \x1b[2J\x1b[31mred\x1b[0m\x1b]0;title\x07 over\x00nul\ttab "
    "\u202eesrever\u202c \U0001f468\u200d\U0001f469\u200d\U0001f467 "
    "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 end\nsecond line"
)
# The form's text box keeps line breaks as \n (a pasted \r becomes one); a prompts file
# carries any character, so this one arrives as a command, as if from --prompts.
CARRIAGE_RETURN_PROMPT = "progress 10%\r100% done\r\n\x1b[1Aup\x00"


def unsafe_chars(strips: Iterable[Strip]) -> set[str]:
    """Characters drawn that a terminal would act on instead of showing."""
    text = "".join(segment.text for strip in strips for segment in strip)
    return {c for c in text if unicodedata.category(c) in ("Cc", "Cf")}


def strip_text(strip: Strip) -> str:
    return "".join(segment.text for segment in strip)


async def test_hostile_prompts_reach_the_engine_intact_and_draw_safely() -> None:
    engine = FaultyEngine()
    driver = driver_for(engine)
    app = new_app(driver)
    async with app.run_test(size=SIZE) as pilot:
        await open_form(pilot, app_prompt="")
        app.screen.query_one("#prompt", TextArea).load_text(HOSTILE_PROMPT)  # pasted
        await pilot.press("ctrl+s")
        driver.send(AddRequest("file-1", CARRIAGE_RETURN_PROMPT, SamplingSpec(max_tokens=3)))
        await until(pilot, lambda: _finished_states(pilot) == [RequestState.FINISHED] * 2)
        assert [prompt for _, prompt, _ in engine.added] == [HOSTILE_PROMPT, CARRIAGE_RETURN_PROMPT]

        finished = app.query_one("#finished", RequestTable)
        width = finished.scrollable_content_region.width
        rows = [finished.render_line(y) for y in range(finished.scrollable_content_region.height)]
        assert [strip.cell_length for strip in rows] == [width] * len(rows)
        assert unsafe_chars(rows) == set()
        assert strip_text(rows[1]).startswith("u1 ") and "start" in strip_text(rows[1])
        assert strip_text(rows[2]).startswith("file-1") and "progress" in strip_text(rows[2])

        finished.focus()
        for row, expected in ((0, ("second line", "\u05e9\u05dc\u05d5\u05dd")), (1, ("done",))):
            finished.move_cursor(row)
            await pilot.press("enter")
            detail = app.screen
            assert isinstance(detail, DetailScreen)
            await pilot.pause()
            body = detail.query_one("#detail-body", Static)
            lines = body.render_lines(Region(0, 0, body.size.width, body.size.height))
            assert lines and all(strip.cell_length == body.size.width for strip in lines)
            assert unsafe_chars(lines) == set()
            text = "\n".join(strip_text(strip) for strip in lines)
            assert all(part in text for part in expected)
            await pilot.press("escape")
        await pilot.press("q")
    assert not driver.alive
    assert driver.latest().engine_state is EngineState.STOPPED


async def test_ctrl_c_quits_even_from_the_form() -> None:
    """In the form q is a letter; ctrl+c still stops the engine and quits, as a terminal user
    expects (Textual would take it as "copy" there)."""
    before = running_now()
    engine = FaultyEngine()
    driver = driver_for(engine)
    app = new_app(driver)
    async with app.run_test(size=SIZE) as pilot:
        await open_form(pilot, app_prompt="half typed q")
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.is_running)
    assert engine.added == []
    assert not driver.alive
    assert leftovers(before) == []


def test_stop_strings_survive_a_round_trip_through_the_form_fields() -> None:
    """Presets and the detail view show a spec as form text; reading it back gives the same."""
    stops = ("\n\n", "a\\nb", "tab\there", "\\", "\"q\" 'é🚀'", " ")
    spec = SamplingSpec(stop=stops)
    assert form_values(spec)["stop"].count("\n") == len(stops) - 1  # one line per string
    assert parse_form(form_values(spec)) == (spec, {})


@pytest.mark.parametrize("name", ["logprobs", "prompt_logprobs"])
async def test_minus_one_logprobs_is_refused_as_vllm_would_refuse_it(name: str) -> None:
    """-1 means the whole vocabulary, which vLLM then refuses as more than ``max_logprobs``
    ("Requested prompt logprobs of 2048, which is greater than max allowed: 20"): the form
    says so beside the field and sends nothing."""
    engine = FaultyEngine()
    driver = driver_for(engine)
    app = new_app(driver)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot)
        await fill(pilot, name, "-1")
        shown = await message_after(pilot, form, name, "max_logprobs (20)")
        assert f"{name} -1 means the whole vocabulary" in shown and "max_logprobs (20)" in shown
        await pilot.press("ctrl+s")
        assert app.screen is form
        await pilot.press("ctrl+c")
    assert engine.added == []


def test_minus_one_logprobs_passes_when_the_engine_allows_any_count() -> None:
    """``--max-logprobs -1`` lifts vLLM's limit: -1 and any count are then taken."""
    for name in ("logprobs", "prompt_logprobs"):
        for text in ("-1", "5000"):
            spec, errors = parse_form({name: text}, max_logprobs=-1)
            assert errors == {} and spec is not None and getattr(spec, name) == int(text)
        assert parse_form({name: "-2"}, max_logprobs=-1)[1] == {
            name: f"{name} must be non-negative or -1, got -2."
        }
