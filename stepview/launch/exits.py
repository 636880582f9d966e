"""How a run ends: its exit code, the one-line messages on stderr, and leaving the process.

Every message stepview prints for the user is one line starting with ``stepview:`` on
stderr, never a traceback or a usage block, and never a control character from outside. The
terminal may be gone by then (a hang-up), so printing never raises.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import NoReturn, TextIO

from stepview.launch.signals_between import stopping
from stepview.model.outside_text import terminal_line

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # what a shell reports for a program ended by Ctrl+C
EXIT_BROKEN_PIPE = 141  # what a shell reports for a filter whose reader went away (SIGPIPE)


def notice(message: str) -> None:
    """Tell the user ``message`` on stderr, as ``stepview: message``, in one line: what it
    quotes from outside (a server's name, a file's label, vLLM's error) cannot steer the
    terminal (:func:`~stepview.model.outside_text.terminal_line`)."""
    with contextlib.suppress(OSError, ValueError):
        print(f"stepview: {terminal_line(message)}", file=sys.stderr, flush=True)


def fail(message: str, code: int = EXIT_USAGE) -> int:
    """Tell the user what went wrong; returns ``code`` for the caller to return."""
    notice(message)
    return code


def unfinished_note(count: int, results: Path | None) -> str:
    """How the exit line tells of requests the run left unfinished ("" when there were none):
    how many, and where they are recorded (state ``unfinished``, with their tokens so far)."""
    if not count:
        return ""
    requests = "request" if count == 1 else "requests"
    where = f", recorded in {results}" if results is not None else ""
    return f"{count} unfinished {requests}{where}"


def exit_now(code: int, *, run_exit_handlers: bool = True) -> NoReturn:
    """End the process without Python's interpreter teardown.

    With torch and vLLM loaded, the teardown takes ~2 s after everything stepview does is
    over (engine shut down, results and trace closed): quitting would take 3 s instead of
    1, and a slow engine shutdown plus the teardown could pass the 5 s a quit may take.
    Registered exit handlers still run (logging's flush, multiprocessing's clean-up of child
    processes); only the module teardown is skipped. With an engine that never stopped,
    ``run_exit_handlers=False`` skips them too: they could wait on that engine for ever.
    """
    if run_exit_handlers:
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(code)


class StopEvent(threading.Event):
    """Set by the first stop signal; :attr:`signum` says which."""

    signum: int | None = None

    @property
    def name(self) -> str:
        return "a signal" if self.signum is None else signal.Signals(self.signum).name


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopEvent]:
    """An event set by SIGTERM, SIGHUP or SIGINT while the block runs; the handlers before are
    put back after it. A signal the process was started ignoring stays ignored: under
    ``nohup`` a hang-up must not end the run."""
    stop = StopEvent()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if not stop.is_set():
            stop.signum = signum
        # Set from a thread of its own, never here: the handler runs in the main thread,
        # which may be inside ``stop.wait`` holding the event's lock, and ``set`` takes that
        # lock: a headless watch hung for good on SIGTERM (its stacks showed exactly that).
        threading.Thread(target=stop.set, name="stepview-stop", daemon=True).start()

    previous = {
        sig: signal.signal(sig, on_signal)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
        if signal.getsignal(sig) is not signal.SIG_IGN
    }
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        stopping()  # the run is over: a signal now must not cut the writing of its results


def silence(out: TextIO) -> None:
    """Point ``out``'s descriptor at /dev/null: its reader went away, and text still buffered
    must not raise again when the stream is flushed at exit."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
