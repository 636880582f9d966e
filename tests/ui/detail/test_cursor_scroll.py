"""Arrowing through a completion below a long prompt scrolls the token under the cursor into
view: the heat-map is read at the cursor, never blind below the fold."""

from __future__ import annotations

from textual.containers import VerticalScroll

from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineCounters, EngineState, RequestState, StepSnapshot
from stepview.testing import scenes
from stepview.testing.scenes import until
from stepview.testing.snapshots import INFO, request
from stepview.ui.detail.screen import DetailScreen

LONG_PROMPT = "\n".join(f"line {n} of a long system prompt" for n in range(60))


async def test_the_cursor_token_is_scrolled_into_view() -> None:
    view = request(
        "long",
        LONG_PROMPT,
        RequestState.DECODING,
        spec=SamplingSpec(temperature=0.0, logprobs=1),
        scheduled=0.1,
        first_token=0.2,
        prompt_tokens=600,
        computed=600,
        tokens=12,
    )
    snapshot = StepSnapshot(
        step=3,
        clock=0.5,
        engine_state=EngineState.RUNNING,
        info=INFO,
        counters=EngineCounters(running=1),
        active=(view,),
    )
    app, _ = scenes.make_app(snapshot)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        scroll = app.screen.query_one("#detail-scroll", VerticalScroll)
        assert scroll.scroll_y == 0  # opened at the top: status, timeline, prompt
        await pilot.press("right", "right")
        # The completion is below 60 prompt lines: the view follows the cursor down to it
        # (scroll_to_region after a refresh, and its scroll after another).
        await until(pilot, lambda: scroll.scroll_y > 40)
