"""A server watched through its /metrics alone: its panel where the panes were, said once.

Plain snapshots with a ``server`` window, as ``MetricsWatch`` makes them, drawn by the real
app from a static source (the UI imports nothing of the engine).
"""

from __future__ import annotations

from dataclasses import replace

from stepview.model.server_window import Latency, ServerWindow
from stepview.model.snapshot import (
    EngineCounters,
    EngineInfo,
    EngineState,
    RecentStep,
    StepSnapshot,
)
from stepview.testing.scenes import make_app
from stepview.testing.snapshots import mid_run
from stepview.ui.app import StepviewApp
from stepview.ui.main.request_table import RequestTable
from stepview.ui.main.server_panel import ServerPanel
from stepview.ui.main.status_bar import StatusBar

ADDRESS = "http://127.0.0.1:8000"
HINT = (
    "STEPVIEW_PUBLISH=tcp://127.0.0.1:5570 \\\n"
    "  python -m vllm.entrypoints.openai.api_server --model /m --port 8000 \\\n"
    "  --scheduler-cls stepview.engine.scheduler_plugin.StepviewScheduler\n"
    f"stepview --attach tcp://127.0.0.1:5570 --api {ADDRESS}"
)


def watched(window: ServerWindow | None) -> StepSnapshot:
    return StepSnapshot(
        step=12,
        clock=12.0,
        engine_state=EngineState.RUNNING,
        info=EngineInfo(model=f"m @ {ADDRESS}", attached=ADDRESS, detailed_states=False),
        step_time=1.0,
        counters=EngineCounters(running=3, waiting=2, kv_cache_usage=0.5),
        recent=tuple(RecentStep(i, float(i), 1.0, 3, 2, 0.5, 40) for i in range(1, 13)),
        server=window,
    )


WINDOW = ServerWindow(
    ADDRESS,
    60.0,
    12.0,
    (Latency("ttft", 0.032, 0.048, 0.079, 12), Latency("e2e")),
    (("capacity", 2), ("deferred", 0)),
    (("length", 9), ("stop", 3)),
    40,
    1,
    0.25,
    24.0,
    HINT,
)


def panel_text(app: StepviewApp) -> str:
    return str(app.query_one(ServerPanel).render())


async def test_the_panel_takes_the_panes_place_and_says_the_restart_line_once() -> None:
    app, _ = make_app(watched(WINDOW), accepts_requests=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.query_one(ServerPanel).display
        assert not any(pane.visible and pane.region.height for pane in app.query(RequestTable))
        text = panel_text(app)
        assert "capacity 2   deferred 0" in text
        assert "12 in the window (length 9, stop 3) · 40 since the server started" in text
        ttft = next(line for line in text.splitlines() if "time to first token" in line)
        assert ttft.split()[-4:] == ["32ms", "48ms", "79ms", "12"]
        end = next(line for line in text.splitlines() if "end to end" in line)
        assert end.split()[-4:] == ["-", "-", "-", "0"]  # nothing observed: no percentile
        assert text.count("No per-request view") == 1
        assert all(f"  {line}" in text.splitlines() for line in HINT.splitlines())
        status = str(app.query_one(StatusBar).render())
        assert "scrape 12" in status and "steps/s 24" in status and "wait 2" in status


async def test_an_older_vllm_says_it_does_not_report_reasons() -> None:
    app, _ = make_app(watched(replace(WINDOW, waiting_by_reason=())), accepts_requests=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "not reported by this vLLM" in panel_text(app)


async def test_any_other_source_keeps_its_panes() -> None:
    app, _ = make_app(mid_run())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert not app.query_one(ServerPanel).display
        assert app.query_one("#running", RequestTable).region.height > 0
