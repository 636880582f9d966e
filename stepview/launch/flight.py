"""``--flight-recorder``: its folder, its notices, and ``SIGUSR1``, for every live mode.

The recorder itself is a driver sink (:mod:`stepview.trace.flight`). Here it is made before
the engine starts, in a folder that is made (stepview's data directory by default) and checked
then, so a folder that cannot be written is one line and exit 2, not a lost recording at the
moment of the incident. Headless runs name each recording on stderr as it is written; the
TUI names it in the status bar (stderr is the screen there) and lists them when it ends.

With stepview's own engine each recording also carries the engine core's thread stacks
(:func:`own_core_stacks`; :mod:`stepview.engine.own.core_stacks`); a watch asks the server's
cores' plug-ins for theirs (:mod:`stepview.engine.watch.link.server_stacks`, wired in ``attach``).

``SIGUSR1`` asks for a recording in every mode. Without a recorder it says how to get one
instead of ending the process, which is what an unhandled ``SIGUSR1`` does: a watch left
running for weeks must not die of someone trying.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from stepview.launch.exits import notice
from stepview.launch.paths import output_path_problem
from stepview.launch.signals_between import NO_RECORDER, STARTING, stopping, tell_once
from stepview.model.flight import ON_SIGNAL, FlightControl, FlightDump
from stepview.run.spec import RunSpec
from stepview.trace.flight import FlightRecorder

SIGNAL_WHY = "asked for with SIGUSR1"


def flight_folder(spec: RunSpec) -> Path:
    """``--flight-dir``, or ``flight/`` in stepview's data directory."""
    if spec.outputs.flight_dir is not None:
        return Path(spec.outputs.flight_dir).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("stepview")) / "flight"


def open_flight(
    spec: RunSpec, header: Callable[[], Mapping[str, Any]], *, say: bool
) -> FlightRecorder | str:
    """The recorder ``--flight-recorder`` asks for, its folder made and writable; or why not.

    ``say``: name each recording on stderr as it is written (headless; not under the TUI).
    """
    assert spec.outputs.flight_recorder is not None
    folder = flight_folder(spec)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot make the flight recorder's folder {folder}: {exc.strerror or exc}"
    problem = output_path_problem(folder / ".stepview-write-check")
    if problem is not None:
        return f"the flight recorder cannot write in {folder}: {problem}"
    return FlightRecorder(
        folder,
        spec.outputs.flight_recorder,
        spec.outputs.flight_max_mb << 20,
        header,
        on_dump=say_dump if say else None,
    )


def own_core_stacks(recorder: FlightRecorder | None) -> Callable[[], None]:
    """Have ``recorder``'s recordings carry the stacks of the engine stepview is about to
    start (call before it starts: its core inherits where to write them); the clean-up."""
    if recorder is None:
        return lambda: None
    from stepview.engine.own.core_stacks import open_stacks
    from stepview.engine.own.environment import engine_core_in_own_process

    probe = open_stacks(engine_core_in_own_process())
    recorder.stacks = probe
    return probe.close


def say_dump(dump: FlightDump) -> None:
    """One line on stderr per recording written, extended or complete, and when the engine
    cores' stacks were added to it."""
    if dump.stacks is not None:
        notice(f"flight recording {dump.path}: {dump.stacks}")
    elif not dump.open:
        notice(f"flight recording complete: {dump.path}")
    elif dump.extended:
        notice(f"flight recording goes on ({dump.why}): {dump.path}")
    else:
        notice(f"flight recording ({dump.why}) in {dump.path}")


def recordings_note(recorder: FlightRecorder | None) -> str | None:
    """At the end of a run: how many recordings it wrote and the latest one."""
    if recorder is None or not recorder.written or recorder.last is None:
        return None
    count = recorder.written
    plural = "s" if count > 1 else ""
    return f"{count} flight recording{plural} in {recorder.folder} (latest: {recorder.last.path})"


def ask_from_signal(control: FlightControl | None) -> None:
    """What ``SIGUSR1`` does: a recording, written off the signal's thread; or, once, why
    there is none."""
    if control is None or not control.has_steps:
        tell_once(NO_RECORDER if control is None else STARTING)
        return
    threading.Thread(
        target=control.request, args=(ON_SIGNAL, SIGNAL_WHY), name="stepview-flight", daemon=True
    ).start()


@contextlib.contextmanager
def flight_signal(control: FlightControl | None) -> Iterator[None]:
    """``SIGUSR1`` asks ``control`` for a recording while in the block (headless; the TUI
    adds it to its event loop's handlers). One started ignoring it stays ignored."""
    usr1 = getattr(signal, "SIGUSR1", None)
    if usr1 is None or signal.getsignal(usr1) is signal.SIG_IGN:
        yield
        return

    def on_signal(signum: int, frame: FrameType | None) -> None:
        ask_from_signal(control)

    previous = signal.signal(usr1, on_signal)
    try:
        yield
    finally:
        signal.signal(usr1, previous)
        stopping()
