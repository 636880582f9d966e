"""The load dialog (``w``): validated like the add form, and it starts the load."""

from __future__ import annotations

from textual.widgets import Input, Static

from stepview.engine.driver.loop import Driver
from stepview.model.load import LoadSpec
from stepview.testing.fake_engine import FakeEngine
from stepview.testing.scenes import until
from stepview.ui.app import StepviewApp
from stepview.ui.dialogs.load_form import LoadForm

SIZE = (80, 24)


async def _set(app: StepviewApp, name: str, text: str) -> None:
    app.screen.query_one(f"#field-{name}", Input).value = text


def _error(app: StepviewApp, name: str) -> str:
    return str(app.screen.query_one(f"#error-{name}", Static).render())


async def test_dialog_validates_then_starts_the_load() -> None:
    engine = FakeEngine(max_num_seqs=4, num_kv_blocks=256, max_model_len=64)
    driver = Driver(lambda phase: engine)
    app = StepviewApp(driver, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.shown is not None and app.shown.engine_state.value == "idle")
        await pilot.press("w")
        assert isinstance(app.screen, LoadForm)
        form = app.screen
        # The defaults are offered; on this engine their lengths do not fit its context.
        assert form.values() == LoadSpec().field_text()
        await _set(app, "rate", "0")
        await _set(app, "input_len", "9:3")
        await pilot.pause()
        assert "must be above 0" in _error(app, "rate")
        assert "MIN must not be above MAX" in _error(app, "input_len")
        await pilot.press("ctrl+s")
        assert app.screen is form  # refused: nothing sent
        assert driver.latest().arrivals.total == 0

        await _set(app, "input_len", "40:60")
        await _set(app, "rate", "20")
        await pilot.pause()
        assert _error(app, "rate") == ""
        assert "--max-model-len 64" in _error(app, "input_len")  # the engine's context

        await _set(app, "count", "6")
        await _set(app, "input_len", "4:8")
        await _set(app, "output_len", "2:3")
        await pilot.pause()
        await pilot.press("ctrl+s")
        assert not isinstance(app.screen, LoadForm)
        await until(pilot, lambda: driver.latest().arrivals.total == 6)
        await until(pilot, lambda: len(driver.latest().finished) == 6)
        assert driver.latest().arrivals.arrived == 6
        ids = sorted(view.request_id for view in driver.latest().finished)
        assert ids == [f"load1-{i}" for i in range(6)]
        await until(pilot, lambda: "load 6/6 arrived" in str(app.query_one("#status").render()))

        await pilot.press("w")  # the last load is offered again
        assert isinstance(app.screen, LoadForm)
        assert app.screen.values()["count"] == "6"
        await pilot.press("escape")
        assert not isinstance(app.screen, LoadForm)
        await pilot.press("q")
    assert not driver.alive
