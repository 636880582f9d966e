"""The real ``stepview`` command with a fault injected into it (vLLM's adapter, mostly).

    python tests/reliability/launcher.py FAULT [N] [+ FAULT [N]...] -- STEPVIEW-ARGS...

FAULT is ``hang-step-from N`` (the Nth ``step()`` and every later one never returns, like a
hung GPU kernel), ``raise-in-step N`` (the Nth ``step()`` raises), ``hold-at N`` (the Nth
``step()`` waits until stepview is asked to stop, then runs: a run held mid-way for as long
as the test needs, however slow the machine or its screen — see :func:`hold`), ``pace MS``
(every ``step()`` takes MS ms more, as on a large model: a run that keeps stepping for
minutes on a small workload and little CPU — see :func:`pace`), all patched into
``stepview.engine.own.vllm_engine.VllmEngine.step``; ``signals-in-start-up NAME...`` (the
signals named, ``USR1`` say, sent in order just before vLLM's flags are parsed — see
:func:`signals_in_start_up`); ``signal-in-build NAME`` (the signal sent once the tiny model's
build has begun, its half-built folder there: give the run an empty cache);
``signals-in-finish NAME...`` (sent as a headless run's results are being finished);
``stuck-in-start-up NAME`` (the engine's build starts a child process, sends the signal named,
``-`` for none, and never returns: a long build, the built-in model's conversion, say); or
``crash-ui N`` (the first snapshot of step N or later raises while being drawn: a bug in
stepview itself; by step, not by count, as a busy machine's UI may draw only the first and the
last of a quick replay); or ``fake-core`` (the engine is a stand-in for vLLM's engine core in
a process of its own, see ``tests/reliability/fake_core.py``; the faults after it apply to
it). Several faults go together joined by ``+`` (``fake-core + hold-at 120``): one run, one
engine start, several moments held. It then
runs ``stepview.cli.main()`` exactly as the installed console script does, so everything
else is the real command.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
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


def hold(at: int, engine: type[Any] | None = None) -> None:
    """Hold the run before the ``at``-th ``step()`` until the driver is told to stop.

    Tests that interrupt a run "mid-way" used to need a workload long enough to outlast a
    busy machine's slow screen (600 requests x 480 tokens), and still raced it. Held here,
    the run stays exactly mid-way, requests finished and others running, until the quit under
    test reaches the driver (``Driver.stop``, called by every way out: ``q``, Ctrl+C, SIGTERM,
    SIGHUP); the held step then runs as a real one would have, on whatever the test did to
    the engine meanwhile (a stopped core blocks it, as in production). ``engine``: the class
    whose ``step`` is held (vLLM's adapter unless told).
    """
    from stepview.engine.driver.loop import Driver
    from stepview.engine.own.vllm_engine import VllmEngine

    held = VllmEngine if engine is None else engine
    real_step, real_stop = held.step, Driver.stop
    calls = 0
    released = threading.Event()

    def step(self: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == at:
            released.wait()
        return real_step(self)

    def stop(self: Driver, timeout: float = 5.0) -> None:
        released.set()
        real_stop(self, timeout)

    held.step = step  # type: ignore[method-assign]
    Driver.stop = stop  # type: ignore[method-assign]


def pace(ms: int) -> None:
    """Make every ``step()`` take ``ms`` ms more, sleeping (no CPU): a test that needs steps to
    go on while it acts (a resize redraws new ones) gets them from a few requests, instead of
    from a workload so large that engine and screen starve each other on a busy machine."""
    from stepview.engine.own.vllm_engine import VllmEngine

    real_step = VllmEngine.step

    def step(self: VllmEngine) -> Any:
        time.sleep(ms / 1000)
        return real_step(self)

    VllmEngine.step = step  # type: ignore[method-assign]


def signals_in_start_up(names: list[str]) -> None:
    """Send this process the signals ``names`` (``USR1``, ``TERM``...) in order just before
    vLLM's flags are parsed (``import vllm``: the seconds of a real start-up, where an
    operator's signal lands): held there by the code itself, not by a race with a signal sent
    from outside."""
    from stepview.engine.own import engine_args

    real_parse = engine_args.parse_engine_args

    def parse(*args: Any, **kwargs: Any) -> Any:
        for name in names:
            os.kill(os.getpid(), signal.Signals[f"SIG{name}"])  # handled before the next bytecode
        return real_parse(*args, **kwargs)

    engine_args.parse_engine_args = parse


def signals_in_finish(names: list[str]) -> None:
    """Send this process the signals ``names`` as a headless run starts to finish its
    outputs: the run is over, what it saved is being written."""
    from stepview.launch import headless

    real_finish = headless.finish_run

    def finish_run(*args: Any, **kwargs: Any) -> Any:
        for name in names:
            os.kill(os.getpid(), signal.Signals[f"SIG{name}"])
        return real_finish(*args, **kwargs)

    headless.finish_run = finish_run


def stuck_in_start_up(name: str) -> None:
    """The engine's build, on the driver thread, starts a child process (as vLLM starts its
    engine core), sends the signal ``name`` (``-``: none) and then never returns."""
    import subprocess

    from stepview.engine.own.vllm_engine import VllmEngine

    def create(*args: Any, **kwargs: Any) -> Any:
        child = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)
        pid_file = os.environ.get("STEPVIEW_TEST_CHILD_PID")  # for the test to find it
        if pid_file:
            Path(pid_file).write_text(str(child.pid))
        if name != "-":
            os.kill(os.getpid(), signal.Signals[f"SIG{name}"])
        threading.Event().wait()

    VllmEngine.create = create  # type: ignore[method-assign]


def signal_in_build(name: str) -> None:
    """Send this process the signal ``name`` from inside the tiny model's build, once its
    temporary folder exists and holds a file: a conversion caught half way."""
    from stepview.engine.own import tiny_model

    real_ensure_built = tiny_model.ensure_built

    def ensure_built(parent: Any, folder: str, is_complete: Any, build: Any) -> Any:
        def half_built(tmp: Path) -> None:
            (tmp / "config.json").write_text("{}")
            os.kill(os.getpid(), signal.Signals[f"SIG{name}"])
            build(tmp)

        return real_ensure_built(parent, folder, is_complete, half_built)

    tiny_model.ensure_built = ensure_built


def crash_ui(at: int) -> None:
    from stepview.model.snapshot import StepSnapshot
    from stepview.ui.app import StepviewApp

    real_show = StepviewApp.show_snapshot

    def show_snapshot(self: StepviewApp, snapshot: StepSnapshot) -> None:
        if snapshot.step >= at:
            raise InjectedFault(f"injected by the test at step {snapshot.step}")
        real_show(self, snapshot)

    StepviewApp.show_snapshot = show_snapshot  # type: ignore[method-assign]


def faults(words: list[str]) -> list[list[str]]:
    """``FAULT [N...] + FAULT [N...]`` -> one list per fault, in order."""
    found: list[list[str]] = [[]]
    for word in words:
        if word == "+":
            found.append([])
        else:
            found[-1].append(word)
    return found


def apply(fault: str, numbers: list[str], engine: type[Any] | None) -> None:
    """Put one fault in place (``engine``: the stand-in core's engine class, if any)."""
    if fault == "crash-ui":
        crash_ui(int(numbers[0]))
    elif fault == "hold-at":
        hold(int(numbers[0]), engine)
    elif fault == "signals-in-start-up":
        signals_in_start_up(numbers)
    elif fault == "signals-in-finish":
        signals_in_finish(numbers)
    elif fault == "stuck-in-start-up":
        stuck_in_start_up(numbers[0])
    elif fault == "signal-in-build":
        signal_in_build(numbers[0])
    elif fault == "pace":
        pace(int(numbers[0]))
    elif fault != "none":
        inject(fault, int(numbers[0]))


def main(argv: list[str]) -> int:
    split = argv.index("--")
    engine = None
    for fault, *numbers in faults(argv[:split]):
        if fault == "fake-core":
            sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script
            from tests.reliability.fake_core import install

            engine = install()
        else:
            apply(fault, numbers, engine)
    sys.argv = ["stepview", *argv[split + 1 :]]
    from stepview.cli import main as stepview_main

    return stepview_main()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
