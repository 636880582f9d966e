"""Running the Textual app on a snapshot source, the same way for a live engine and a replay.

Ctrl+C (a key inside the TUI), SIGINT, SIGTERM and SIGHUP end the app the way ``q`` does: the
source stops (the engine between two steps, files flushed) and the terminal is restored. All
of it is bounded by one deadline, :data:`~stepview.model.source.STOP_TIMEOUT_S`: the app's
quit asks the source to stop, and the stop here shares that deadline (the driver counts it from
the first ask), so a stuck engine is given up on (its processes killed: see
:mod:`stepview.launch.stuck`) instead of holding the terminal. A signal
also arms a last-resort watchdog (:func:`arm_exit_watchdog`): a terminal that vanished can
leave Textual's writer blocked for ever, and a hung-up stepview must still go away.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import threading
from collections.abc import Callable

from stepview.launch.exits import exit_now
from stepview.launch.signals_between import REPLAY_USR1, USR2, stopping
from stepview.model.flight import ON_SIGNAL, FlightControl
from stepview.model.source import STOP_TIMEOUT_S, SnapshotSource

# How often the app checks whether it should leave by itself (a start-up usage error).
_WATCH_INTERVAL_S = 0.05
# After a signal, how long the orderly way out may take before the process leaves anyway:
# the stop deadline, plus time to restore the terminal and flush.
EXIT_WATCHDOG_S = STOP_TIMEOUT_S + 3.0


def arm_exit_watchdog(delay: float, code: int) -> threading.Timer:
    """Leave the process with ``code`` after ``delay`` seconds, unless it has left by then.

    Results and traces are flushed line by line as the run goes, so nothing is lost: this
    only ends a process whose way out is stuck (seen once: SIGHUP over ssh, Textual's writer
    thread waiting on a terminal that was gone). Exit handlers are skipped, as they may wait
    on the very thing that is stuck.
    """
    timer = threading.Timer(delay, functools.partial(exit_now, code, run_exit_handlers=False))
    timer.daemon = True
    timer.start()
    return timer


def run_app(
    source: SnapshotSource,
    *,
    replay: bool = False,
    exit_when: Callable[[], bool] | None = None,
    flight: FlightControl | None = None,
) -> int:
    """Run the app on ``source``, then stop the source; returns the app's return code.

    ``flight``: the ``--flight-recorder``, for the F key and ``SIGUSR1`` (which, live, asks
    for a recording, or says there is no recorder, rather than ending stepview).

    The app runs until the user quits, a signal asks it to stop, or ``exit_when()`` (polled)
    turns true. A replay draws every snapshot; a live run caps the UI's CPU so drawing does not
    slow the engine it shows. The source is stopped (within the one deadline) however the app
    ended, a crash included; whether it actually stopped is ``source.alive``.
    """
    try:
        return _run(source, replay=replay, exit_when=exit_when, flight=flight)
    finally:
        source.stop(STOP_TIMEOUT_S)


def _run(
    source: SnapshotSource,
    *,
    replay: bool,
    exit_when: Callable[[], bool] | None,
    flight: FlightControl | None,
) -> int:
    from stepview.ui.app import StepviewApp

    if os.environ.get("TERM") == "dumb":
        # A terminal that declares no capabilities gets no colour codes: drawn as NO_COLOR
        # asks (Textual reads it when the app is built), in the terminal's own colours.
        os.environ.setdefault("NO_COLOR", "1")

    app = StepviewApp(source, cpu_budget=None if replay else StepviewApp.CPU_BUDGET, flight=flight)

    def on_signal(signum: int) -> None:
        # The same way out as ctrl+c: from any screen, one bounded wait for the engine.
        arm_exit_watchdog(EXIT_WATCHDOG_S, 128 + signum)
        app.call_next(app.action_interrupt)

    async def leave_when(condition: Callable[[], bool]) -> None:
        while not condition():
            await asyncio.sleep(_WATCH_INTERVAL_S)
        app.exit()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
        # SIGUSR1: a flight recording (a replay is one already); SIGUSR2: nothing, in a toast
        # as stderr is the screen. One started ignored stays ignored (launch/signals_between.py).
        usr1: tuple[Callable[..., object], str] = (
            (app.notify, REPLAY_USR1) if replay else (app.action_flight, ON_SIGNAL)
        )
        for sig, (answer, argument) in (
            (signal.SIGUSR1, usr1),
            (signal.SIGUSR2, (app.notify, USR2)),
        ):
            if signal.getsignal(sig) is not signal.SIG_IGN:
                loop.add_signal_handler(sig, app.call_next, answer, argument)
        watcher = None if exit_when is None else asyncio.create_task(leave_when(exit_when))
        try:
            await app.run_async()
        finally:
            if watcher is not None:
                watcher.cancel()

    asyncio.run(main())
    stopping()  # asyncio left its signals at their default: answered again (signals_between.py)
    return app.return_code or 0
