"""The F key: a flight recording from the TUI, named in a toast and the status bar.

A real :class:`~stepview.trace.flight.FlightRecorder` holds the scene's snapshot; F asks it
from a worker thread, as SIGUSR1 does, and the app's timer notices what it wrote.
"""

from __future__ import annotations

from pathlib import Path

from stepview.model.flight import ON_KEY
from stepview.testing.scenes import until
from stepview.testing.snapshots import mid_run
from stepview.testing.sources import StaticSource
from stepview.trace.flight import FlightRecorder
from stepview.trace.reader import load_trace
from stepview.ui.app import StepviewApp
from stepview.ui.main.flight_key import NO_RECORDER, NOTHING_YET
from stepview.ui.main.status_bar import StatusBar


def status_text(app: StepviewApp) -> str:
    return str(app.query_one(StatusBar).render())


def toasts(app: StepviewApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_f_writes_a_recording_and_the_status_bar_names_it(tmp_path: Path) -> None:
    snapshot = mid_run()
    recorder = FlightRecorder(tmp_path, 600.0, 1 << 24)
    recorder.on_snapshot(snapshot, ())
    app = StepviewApp(StaticSource(snapshot), clock=None, flight=recorder)
    app.animation_level = "none"
    async with app.run_test(size=(140, 30)) as pilot:
        await pilot.pause()
        assert "flight" not in status_text(app)
        await pilot.press("F")
        # The status bar changes at once; the toast arrives as a message a moment later.
        await until(
            pilot,
            lambda: (
                "✈ flight " in status_text(app)
                and any(
                    t.startswith("Flight recording (asked for with the F key) in ")
                    for t in toasts(app)
                )
            ),
        )
        last = recorder.last
        assert last is not None and last.kind == ON_KEY and last.open
        assert Path(last.path).name in status_text(app)
    recorder.close()
    trace = load_trace(last.path)
    assert trace.header["flight"]["why"] == "asked for with the F key"
    assert [s.step for s in trace.snapshots] == [snapshot.step]


async def test_f_without_a_recorder_says_how_to_get_one() -> None:
    app = StepviewApp(StaticSource(mid_run()), clock=None)
    app.animation_level = "none"
    async with app.run_test(size=(140, 30)) as pilot:
        await pilot.press("F")
        await until(pilot, lambda: NO_RECORDER in toasts(app))


async def test_f_before_the_engines_first_step_says_there_is_nothing_yet(tmp_path: Path) -> None:
    """Asked while the engine starts (as ``SIGUSR1`` from an operator may be): a recording
    would be empty, so none is written and the toast says why."""
    recorder = FlightRecorder(tmp_path, 600.0, 1 << 24)
    app = StepviewApp(StaticSource(mid_run()), clock=None, flight=recorder)
    app.animation_level = "none"
    async with app.run_test(size=(140, 30)) as pilot:
        await pilot.press("F")
        await until(pilot, lambda: NOTHING_YET in toasts(app))
    recorder.close()
    assert recorder.last is None and not list(tmp_path.iterdir())
