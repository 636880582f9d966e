"""Run the TUI on a live engine: the default ``stepview`` command.

The app is up before vLLM is even imported (the engine thread does that), so a bad engine
flag that only vLLM's parser can name is caught early from a cached list of vLLM's option
names when there is one. Otherwise the engine thread's parse fails after the app started:
the app then leaves by itself and the one-line usage message is printed on the restored
terminal, with exit code 2, exactly as if the flag had been caught up front.

Ctrl+C (a key inside the TUI), SIGINT, SIGTERM and SIGHUP end the app the way ``q`` does:
the engine stops between steps, the results file is complete, the terminal is restored.
All of it is bounded: the driver's ``stop`` counts one deadline from the first ask, and an
engine that still has not stopped by then is left behind (its results are already flushed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from stepview.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, _fail, default_results_path
from stepview.model.prompts import PromptsFileError, read_prompts
from stepview.model.source import SnapshotSource

STOP_TIMEOUT_S = 4.0
# How often the app checks whether it should leave by itself (a start-up usage error).
_WATCH_INTERVAL_S = 0.05


def run_app(
    source: SnapshotSource,
    *,
    replay: bool = False,
    exit_when: Callable[[], bool] | None = None,
) -> int:
    """Run the Textual app on ``source``; returns its return code (non-zero if it crashed).

    It runs until the user quits, a signal asks it to stop, or ``exit_when()`` (polled)
    turns true.
    """
    from stepview.ui.app import StepviewApp

    app = StepviewApp(source, replay=replay, cpu_budget=None if replay else StepviewApp.CPU_BUDGET)

    def on_signal() -> None:
        # The same way out as ctrl+c: from any screen, one bounded wait for the engine.
        app.call_next(app.action_interrupt)

    async def leave_when(condition: Callable[[], bool]) -> None:
        while not condition():
            await asyncio.sleep(_WATCH_INTERVAL_S)
        app.exit()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        watcher = None if exit_when is None else asyncio.create_task(leave_when(exit_when))
        try:
            await app.run_async()
        finally:
            if watcher is not None:
                watcher.cancel()

    asyncio.run(main())
    return app.return_code or 0


def run_tui(own: argparse.Namespace, engine_argv: list[str], log_path: Path) -> int:
    from stepview.engine.engine_args import UsageError, check_option_names
    from stepview.engine.environment import redirect_native_stderr
    from stepview.engine.live import live_driver
    from stepview.engine.sinks import EngineArgsHolder, file_sinks, sink_errors

    try:
        check_option_names(engine_argv)
        requests = read_prompts(own.prompts) if own.prompts else []
    except (UsageError, PromptsFileError) as exc:
        return _fail(str(exc))
    results_path: Path = own.results or default_results_path()
    holder = EngineArgsHolder()
    try:
        sinks = file_sinks(own, holder, results_default=results_path)
    except OSError as exc:
        return _fail(f"cannot open output file: {exc}")
    admit = 0 if own.admit_per_step is None else own.admit_per_step
    driver = live_driver(
        engine_argv,
        log_path,
        holder=holder,
        sinks=sinks,
        history_size=own.history,
        admit_per_step=admit,
    )
    for request in requests:
        driver.send(request)  # queued; they join once the engine is up

    def usage_error() -> UsageError | None:
        exc = driver.startup_exception
        return exc if isinstance(exc, UsageError) else None

    restore_stderr = redirect_native_stderr(log_path)
    try:
        app_code = run_app(driver, exit_when=lambda: usage_error() is not None)
    finally:
        # Shares the deadline the app's quit started: no second wait after a stuck engine.
        driver.stop(STOP_TIMEOUT_S)
        restore_stderr()
    usage = usage_error()
    if usage is not None:
        _drop_if_empty(results_path, own.results is None)
        return _fail(str(usage))
    _report_results(results_path, default=own.results is None)
    if driver.alive:
        # The engine is stuck in start-up or in a step that will not return; every result is
        # already flushed, so leave without waiting for it.
        for error in sink_errors(sinks):
            _tell(f"stepview: {error}")
        _tell("stepview: the engine did not stop in time; exiting anyway")
        _flush_std_streams()
        os._exit(EXIT_FAILED)
    if driver.error:
        _tell(f"stepview: {driver.error} (details in {log_path})")
    file_errors = sink_errors(sinks)
    for error in file_errors:
        _tell(f"stepview: {error}")
    return EXIT_FAILED if driver.error or app_code or file_errors else EXIT_OK


def _tell(message: str) -> None:
    """Print to the terminal, which may be gone (a hang-up): then there is no one to tell."""
    with contextlib.suppress(OSError, ValueError):
        print(message, file=sys.stderr, flush=True)


def _flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()


def _report_results(path: Path, *, default: bool) -> None:
    """Say where the results are, if there are any (an empty default file is removed)."""
    if _drop_if_empty(path, default):
        return
    _tell(f"stepview: finished requests saved in {path}")


def _drop_if_empty(path: Path, default: bool) -> bool:
    """True when ``path`` holds no results; a default one that is empty is deleted."""
    try:
        if path.stat().st_size:
            return False
        if default:
            path.unlink()
    except OSError:
        pass
    return True


__all__ = ["EXIT_USAGE", "run_app", "run_tui"]
