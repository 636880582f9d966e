"""A long wait in the detail view's timeline: one row with its steps per reason, which ``e``
expands into its segments and collapses again; Enter shows the chosen row's first step."""

from __future__ import annotations

from textual.widgets import Static

from stepview.model.scheduling import BEHIND, KV_CACHE, TOKEN_BUDGET, WaitReason
from stepview.model.snapshot import EngineCounters, EngineState, RequestState, StepSnapshot
from stepview.testing import scenes
from stepview.testing.snapshots import INFO, request
from stepview.ui.app import StepviewApp
from stepview.ui.detail.screen import DetailScreen

_FLIPS = (BEHIND, KV_CACHE, BEHIND, TOKEN_BUDGET)


def _history() -> list[StepSnapshot]:
    """``w`` arrives at 0, waits steps 1-12 for a reason that changes every step (``behind``,
    ``kv_cache``, ``behind``, ``token_budget``, ...), is prefilled at 13 and decodes to 15."""
    out = []
    for step in range(16):
        if step == 0:
            state, computed, tokens, wait = RequestState.WAITING, 0, 0, None
        elif step < 13:
            code = _FLIPS[step % 4]
            state, computed, tokens, wait = RequestState.WAITING, 0, 0, WaitReason(code, code)
        else:
            state, computed, tokens, wait = RequestState.DECODING, 8, step - 12, None
        view = request(
            "w",
            "Why so slow?",
            state,
            scheduled=1.25 if step >= 13 else None,
            first_token=1.3 if step >= 13 else None,
            prompt_tokens=8,
            computed=computed,
            tokens=tokens,
            wait=wait,
        )
        out.append(
            StepSnapshot(
                step=step,
                clock=step / 10,
                engine_state=EngineState.RUNNING,
                info=INFO,
                step_time=0.05 if step else 0.0,
                counters=EngineCounters(running=int(step >= 13), waiting=int(step < 13)),
                active=(view,),
            )
        )
    return out


def _body(app: StepviewApp) -> str:
    return str(app.screen.query_one("#detail-body", Static).render())


async def _open_detail(app: StepviewApp, pilot: scenes.Pilot[None]) -> DetailScreen:
    await scenes.at_step(15, "enter")(pilot)
    assert isinstance(app.screen, DetailScreen) and app.screen.request_id == "w"
    return app.screen


async def test_a_wait_with_flipping_reasons_is_one_row_with_its_steps_per_reason() -> None:
    app, _ = scenes.history_app(_history())
    async with app.run_test(size=(100, 40)) as pilot:
        await _open_detail(app, pilot)
        body = _body(app)
        assert "waiting   steps 0-12  0.000-1.250s behind 6, kv_cache 3, token_budget 3" in body
        assert "queued 1 ▸ 13 segments" in body
        assert "waiting   step 1" not in body  # no row per segment
        assert "decode 0.20 s, steps 14-15: 2 tok generated" in body  # the chosen row in words
        await pilot.press("comma", "comma")
        body = _body(app)
        assert (
            "waiting 1.25 s, steps 0-12: behind 6 steps, kv_cache 3, token_budget 3, queued 1"
            in body
        )


async def test_e_expands_a_stretch_into_its_segments_and_collapses_it_again() -> None:
    app, _ = scenes.history_app(_history())
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await _open_detail(app, pilot)
        await pilot.press("comma", "comma", "e")
        body = _body(app)
        assert "▾ 13 segments" in body
        assert "  █ waiting   step 0" in body and "  █ waiting   step 12" in body
        assert "waiting 0.05 s, step 0: queued 1 step" in body  # its first segment chosen
        await pilot.press("full_stop", "full_stop")  # the fine segments, one by one
        assert "waiting 0.10 s, step 2: behind 1 step" in _body(app)
        await pilot.press("enter")
        await scenes.until(pilot, lambda: app.shown is not None and app.shown.step == 2)
        assert app.screen is screen
        await pilot.press("e")  # from one of its segments: the stretch again, chosen
        body = _body(app)
        assert "▸ 13 segments" in body and "  █ waiting   step 0" not in body
        assert "waiting 1.25 s, steps 0-12: behind 6 steps" in body


async def test_enter_on_a_stretch_shows_its_first_step() -> None:
    app, _ = scenes.history_app(_history())
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await _open_detail(app, pilot)
        await pilot.press("comma", "comma", "enter")
        await scenes.until(pilot, lambda: app.shown is not None and app.shown.step == 0)
        assert app.screen is screen
        assert "HISTORY step 0" in str(screen.query_one("#detail-scroll").border_subtitle)
        await pilot.press("full_stop", "e")  # the prefill, one segment: nothing to expand
        assert "▾" not in _body(app) and screen.expanded == set()
        assert "prefill 0.05 s, step 13: 8 prompt tok" in _body(app)
