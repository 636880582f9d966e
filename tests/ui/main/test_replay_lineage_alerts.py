"""A replay shows what the trace recorded: a clone's parent in the panes, and the alerts
that held in the status bar, as the live run showed them."""

from __future__ import annotations

from pathlib import Path

from stepview.model.alerts import THRASH, Alert
from stepview.model.lineage import Lineage, LineageKind
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState, RequestView, StepSnapshot, Timings
from stepview.testing.scenes import replay_app, until
from tests.trace.runs import write_trace
from tests.ui.main.test_history import status_text


async def test_replayed_clone_and_alert(tmp_path: Path) -> None:
    parent = RequestView("r3", "hi", SamplingSpec(), RequestState.DECODING, Timings(0.0))
    clone = parent._replace(request_id="r4", lineage=Lineage("r3", LineageKind.CLONE))
    alert = Alert(THRASH, 1, 1.0, "r3 preempted 3 times, 96 tokens lost", "r3")
    path = tmp_path / "t.trace.jsonl"
    write_trace(
        path,
        [
            StepSnapshot(
                step=1,
                clock=1.0,
                engine_state=EngineState.RUNNING,
                active=(parent, clone),
                alerts=(alert,),
            )
        ],
    )
    app, source = replay_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.shown is not None and app.shown.step == 1)
        await pilot.pause()
        assert "r3 preempted 3 times" in status_text(app)
        shown = app.shown.find("r4")
        assert shown is not None and shown.lineage == clone.lineage
        assert "clone of r3" in app.export_screenshot().replace("&#160;", " ")
    source.stop()
