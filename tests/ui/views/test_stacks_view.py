"""Replaying a flight recording that holds an engine core's stacks: told, and ``K`` shows them.

The recording is written by the real flight recorder from the committed replay's snapshots,
its stacks given by a probe standing for the engine core: a real faulthandler dump with the
core's step thread parked in a function of this test's, and a second take that has none
(a core stopped with ``kill -STOP``). The app replays the file as ``--replay`` does.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from textual.widgets import Static

from stepview.model.flight import ON_SIGNAL, FlightDump
from stepview.model.stacks import ASKED, NONE, CoreStacks
from stepview.testing.scenes import replay_app, until
from stepview.trace.flight import FlightRecorder
from stepview.ui.app import StepviewApp
from stepview.ui.views.stacks_view import StacksScreen
from tests.model.test_stacks import real_dump
from tests.ui.replay_trace import recorded_run

SIZE = (100, 40)
STOPPED = "the engine core process 7 (VLLM::EngineCore) is stopped (kill -STOP)"


class Probe:
    def __init__(self) -> None:
        text, self.parked = real_dump()
        self.answers = [
            CoreStacks(
                "7 (VLLM::EngineCore)",
                1_790_000_000.0,
                ASKED,
                text,
                note="written by the core's SIGUSR2 handler (faulthandler)",
                names={self.parked: "parked"},
                step_thread=self.parked,
            ),
            CoreStacks("7 (VLLM::EngineCore)", 1_790_000_060.0, NONE, why_none=STOPPED),
        ]

    def take(self, since: float) -> Sequence[CoreStacks]:
        return [self.answers.pop(0)]


def recording(folder: Path) -> tuple[Path, Probe]:
    """A flight recording asked for twice (the core answering, then stopped)."""
    probe = Probe()
    added = threading.Semaphore(0)

    def told(dump: FlightDump) -> None:
        if dump.stacks is not None:
            added.release()

    recorder = FlightRecorder(folder, 3600.0, 1 << 30, {"model": "fake"}, on_dump=told)
    recorder.stacks = probe
    run = recorded_run()
    for snapshot in run[:20]:
        recorder.on_snapshot(snapshot, ())
    recorder.request(ON_SIGNAL, "asked for with SIGUSR1")
    assert added.acquire(timeout=10)
    for snapshot in run[20:]:
        recorder.on_snapshot(snapshot, ())
    recorder.request(ON_SIGNAL, "asked for with SIGUSR1 again")
    assert added.acquire(timeout=10)
    recorder.close()
    (path,) = folder.glob("flight-*.jsonl")
    return path, probe


def shown_text(app: StepviewApp) -> str:
    return str(app.screen.query_one("#stacks-text", Static).render())


async def test_k_lists_the_stacks_with_the_step_threads_frame_first_and_why_none(
    tmp_path: Path,
) -> None:
    path, probe = recording(tmp_path)
    app, source = replay_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: any("K shows them" in n.message for n in app._notifications))
        assert app.check_action("stacks", ()) is True
        await pilot.press("K")
        await until(pilot, lambda: isinstance(app.screen, StacksScreen))
        text = shown_text(app)
        lines = text.splitlines()
        assert lines[0].startswith("─ taken for signal at step ")
        assert lines[1].startswith("7 (VLLM::EngineCore)  asked, 2026-")
        # The thread that runs the core's steps comes first, at the frame it is in.
        label = f'▶ Thread {probe.parked:#x} "parked" (runs the engine core\'s steps)'
        stepping = lines.index(label)
        assert lines[stepping + 1].startswith("    → wait (threading.py:")
        assert "parked_here (test_stacks.py:" in text
        assert f"No stacks: {STOPPED}" in text
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, StacksScreen))
    assert len(source.trace.stacks) == 2


async def test_a_live_run_and_a_recording_without_stacks_have_no_k() -> None:
    from tests.ui.replay_trace import TRACE

    app, _ = replay_app(TRACE)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.check_action("goto", ()) is True)
        assert app.check_action("stacks", ()) is False
        await pilot.press("K")
        await pilot.pause()
        assert not isinstance(app.screen, StacksScreen)
