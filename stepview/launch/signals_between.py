"""What each signal does while no mode answers it: in start-up, and after the run.

Every live mode answers the signals people send it while it runs (``stop_on_signals`` for
headless and ``--attach``, the TUI's event loop, :func:`stepview.launch.flight.flight_signal`
for ``SIGUSR1``). Before one does (``import vllm``, the built-in model's conversion: seconds,
and where a unit systemd has just restarted spends them) and after it is done (results and
exports being written), a signal's default action would end the process without a word. So
``stepview`` answers them from the first line of :func:`stepview.cli.main` to its last:

- ``SIGUSR1``, which operators send for a flight recording: says once why nothing is recorded
  (starting, stopping, no recorder) and goes on;
- ``SIGUSR2``, which means nothing to stepview but tools send by convention (to reopen logs):
  says once that it takes no such signal, and goes on (under the TUI, in a toast);
- ``SIGTERM`` and ``SIGHUP`` (systemd's stop, a closed ssh session): in start-up they stop it
  the way Ctrl+C does, through :class:`StopAsked` raised in the main thread, so a conversion
  half done removes its folder and the one line says which signal ended it (exit code 128 + N,
  as a shell reports a process the signal ended); after the run they are told once that
  stepview is stopping already, so the results and exports being written are not cut short.

- ``SIGINT`` (Ctrl+C): in start-up Python's own answer, ``KeyboardInterrupt``, which
  :func:`stepview.cli.main` turns into one line; after the run the first is told as above,
  and a second leaves at once (an impatient user's way out of a slow disk).

A process started with a signal ignored (``nohup``) keeps it ignored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType
from typing import Literal

from stepview.model.outside_text import terminal_line

NO_RECORDER = "SIGUSR1: there is no flight recorder (start stepview with --flight-recorder 10m)"
STARTING = (
    "SIGUSR1: nothing to record yet, stepview is starting (the flight recorder records from "
    "the first step on: ask again then)"
)
STOPPING = "SIGUSR1: stepview is stopping; nothing more is recorded"
REPLAY_USR1 = "SIGUSR1: a replay records nothing (it is a recording already)"
USR2 = "SIGUSR2: stepview takes no such signal; going on (SIGUSR1 asks for a flight recording)"
STOPPING_ALREADY = "{name}: stepview is stopping already; it finishes writing what it saved"
AGAIN_TO_LEAVE = " (Ctrl+C again to leave now)"

Phase = Literal["starting", "stopping"]


class StopAsked(BaseException):
    """``SIGTERM`` or ``SIGHUP`` in start-up: unwinds the main thread as ``KeyboardInterrupt``
    does (a ``BaseException``, so no ``except Exception`` in vLLM's imports swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


class _Between:
    """What the handler answers: the phase, whether a recorder was asked for (``None``: not
    known yet, before the flags are parsed), and which answers were given already."""

    phase: Phase = "starting"
    recorder: bool | None = None
    installed = False
    interrupted = False  # a SIGINT told after the run: the next one leaves
    told: set[str] = set()


def answer_signals(recorder: bool | None = None) -> None:
    """From now on, until a mode puts its own handlers in front, the signals are answered
    (``recorder``: whether ``--flight-recorder`` was given, once the flags are parsed). For
    the ``stepview`` command only: a test calling :func:`stepview.cli.main` keeps its own."""
    if recorder is not None:
        _Between.recorder = recorder
    _Between.installed = True
    _answer()


def stopping() -> None:
    """The run is over: a signal from now on is told so. The TUI's event loop leaves the
    signals it answered at their default when it closes: put the answers back (if ours)."""
    _Between.phase = "stopping"
    if _Between.installed:
        _answer()


def _answer() -> None:
    for name, handler in (
        ("SIGUSR1", _on_usr1),
        ("SIGUSR2", _on_usr2),
        ("SIGTERM", _on_stop),
        ("SIGHUP", _on_stop),
        ("SIGINT", _on_interrupt),
    ):
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
        os.write(fd, f"stepview: {terminal_line(message)}\n".encode())


def _on_usr1(signum: int, frame: FrameType | None) -> None:
    tell_once(answer(_Between.phase, _Between.recorder))


def _on_usr2(signum: int, frame: FrameType | None) -> None:
    tell_once(USR2)


def _on_stop(signum: int, frame: FrameType | None) -> None:
    if _Between.phase == "starting":
        raise StopAsked(signum)
    tell_once(STOPPING_ALREADY.format(name=signal.Signals(signum).name))


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    if _Between.phase == "starting" or _Between.interrupted:
        raise KeyboardInterrupt
    _Between.interrupted = True
    tell_once(STOPPING_ALREADY.format(name="SIGINT") + AGAIN_TO_LEAVE)
