"""``SIGUSR1`` where no mode answers it (start-up, shut-down, no recorder), and ``SIGUSR2``.

``SIGUSR1``'s default action ends the process, and operators send it for a flight recording
(``docs/leaving-it-running.md``), often to a unit systemd has just restarted: in start-up,
where a SmolLM2 build or ``import vllm`` takes seconds. So ``stepview`` answers it from the
first line of :func:`stepview.cli.main` until the process ends: each live mode puts its own
answer in front while it runs (:func:`stepview.launch.flight.flight_signal`, the TUI's event
loop), and between those this one says, once per reason, why nothing is recorded.

``SIGUSR2`` means nothing to stepview, but its default ends the process too, and tools send
it by convention (to reopen logs, say): a watch left running for weeks says once that it
takes no such signal, and goes on (under the TUI, in a toast: stderr is the screen there).
A process started with either signal ignored keeps it ignored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType
from typing import Literal

NO_RECORDER = "SIGUSR1: there is no flight recorder (start stepview with --flight-recorder 10m)"
STARTING = (
    "SIGUSR1: nothing to record yet, stepview is starting (the flight recorder records from "
    "the first step on: ask again then)"
)
STOPPING = "SIGUSR1: stepview is stopping; nothing more is recorded"
REPLAY_USR1 = "SIGUSR1: a replay records nothing (it is a recording already)"
USR2 = "SIGUSR2: stepview takes no such signal; going on (SIGUSR1 asks for a flight recording)"

Phase = Literal["starting", "stopping"]


class _Between:
    """What the handler answers: the phase, whether a recorder was asked for (``None``: not
    known yet, before the flags are parsed), and which answers were given already."""

    phase: Phase = "starting"
    recorder: bool | None = None
    installed = False
    told: set[str] = set()


def answer_sigusr1(recorder: bool | None = None) -> None:
    """From now on, until a mode puts its own handler in front, ``SIGUSR1`` is answered
    (``recorder``: whether ``--flight-recorder`` was given, once the flags are parsed). For
    the ``stepview`` command only: a test calling :func:`stepview.cli.main` keeps its own."""
    if recorder is not None:
        _Between.recorder = recorder
    _Between.installed = True
    _answer_user_signals()


def stopping() -> None:
    """The run is over: a ``SIGUSR1`` from now on is told so. The TUI's event loop leaves
    both signals at their default when it closes: put the answers back (if they were ours)."""
    _Between.phase = "stopping"
    if _Between.installed:
        _answer_user_signals()


def _answer_user_signals() -> None:
    for name, handler in (("SIGUSR1", _on_usr1), ("SIGUSR2", _on_usr2)):
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) is not signal.SIG_IGN:
            signal.signal(number, handler)


def answer(phase: Phase, recorder: bool | None) -> str:
    """The line for a ``SIGUSR1`` in ``phase``."""
    if recorder is False:
        return NO_RECORDER
    return STARTING if phase == "starting" else STOPPING


def tell_once(message: str) -> None:
    """``stepview: message`` on stderr, the first time only: a script that sends ``SIGUSR1``
    every minute must not fill a log with the same line. Safe in a signal handler."""
    if message in _Between.told:
        return
    _Between.told.add(message)
    # os.write, not print: the signal may land while the main thread is inside a write to
    # stderr's buffer, and a second buffered write from the handler would raise. To
    # sys.stderr's descriptor, not 2: while vLLM starts, fd 2 goes to the log file.
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        fd = 2
    with contextlib.suppress(OSError):
        os.write(fd, f"stepview: {message}\n".encode())


def _on_usr1(signum: int, frame: FrameType | None) -> None:
    tell_once(answer(_Between.phase, _Between.recorder))


def _on_usr2(signum: int, frame: FrameType | None) -> None:
    tell_once(USR2)
