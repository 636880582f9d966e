"""``--flight-recorder`` in the live modes: the engine's stacks, and ``SIGUSR1``.

The recorder itself is a driver sink (:mod:`stepview.trace.flight`), and an output of the
registry (:mod:`stepview.outputs.watching`: its folder made and checked before the engine
starts, its notices). Here is what a mode adds to it.

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
from collections.abc import Callable, Iterator
from types import FrameType

from stepview.launch.signals_between import NO_RECORDER, STARTING, stopping, tell_once
from stepview.model.flight import ON_SIGNAL, FlightControl
from stepview.trace.flight import FlightRecorder

SIGNAL_WHY = "asked for with SIGUSR1"


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
