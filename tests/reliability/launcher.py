"""The real ``stepview`` command with a fault injected into vLLM's adapter.

    python tests/reliability/launcher.py FAULT [N] -- STEPVIEW-ARGS...

FAULT is ``hang-step-from N`` (the Nth ``step()`` and every later one never returns, like a
hung GPU kernel), ``raise-in-step N`` (the Nth ``step()`` raises), both patched into
``stepview.engine.own.vllm_engine.VllmEngine.step``, or ``crash-ui N`` (the first snapshot
of step N or later raises while being drawn: a bug in stepview itself; by step, not by count,
as a busy machine's UI may draw only the first and the last of a quick replay). It then
runs ``stepview.cli.main()`` exactly as the installed console script does, so everything
else is the real command.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

LAUNCHER = [sys.executable, str(Path(__file__).resolve())]
"""The command line that runs this file (tests append the fault and stepview's arguments)."""


class InjectedFault(RuntimeError):
    """What the patched ``step()`` raises."""


def inject(fault: str, at: int) -> None:
    from stepview.engine.own.vllm_engine import VllmEngine

    real_step = VllmEngine.step
    calls = 0
    never = threading.Event()

    def step(self: VllmEngine) -> Any:
        nonlocal calls
        calls += 1
        if calls >= at and fault == "hang-step-from":
            never.wait()
        if calls == at and fault == "raise-in-step":
            raise InjectedFault(f"injected by the test at step {at}")
        return real_step(self)

    VllmEngine.step = step  # type: ignore[method-assign]


def crash_ui(at: int) -> None:
    from stepview.model.snapshot import StepSnapshot
    from stepview.ui.app import StepviewApp

    real_show = StepviewApp.show_snapshot

    def show_snapshot(self: StepviewApp, snapshot: StepSnapshot) -> None:
        if snapshot.step >= at:
            raise InjectedFault(f"injected by the test at step {snapshot.step}")
        real_show(self, snapshot)

    StepviewApp.show_snapshot = show_snapshot  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    split = argv.index("--")
    fault, *numbers = argv[:split]
    if fault == "crash-ui":
        crash_ui(int(numbers[0]))
    elif fault != "none":
        inject(fault, int(numbers[0]))
    sys.argv = ["stepview", *argv[split + 1 :]]
    from stepview.cli import main as stepview_main

    return stepview_main()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
