"""Run the TUI on a live engine: the default ``stepview`` command.

The app is up before vLLM is even imported (the engine thread does that), so a bad engine
flag that only vLLM's parser can name is caught early from a cached list of vLLM's option
names when there is one, and otherwise shown on the error screen and turned into exit code 2.
SIGTERM and SIGHUP end the app the same way ``q`` does: the engine stops between steps, the
results file is complete, the terminal is restored.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from stepview.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, _fail, default_results_path
from stepview.model.prompts import PromptsFileError, read_prompts
from stepview.model.source import SnapshotSource

STOP_TIMEOUT_S = 4.0


def run_app(source: SnapshotSource, *, replay: bool = False) -> None:
    """Run the Textual app on ``source`` until the user quits or a signal asks to stop."""
    from stepview.ui.app import StepviewApp

    app = StepviewApp(source, replay=replay)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            loop.add_signal_handler(sig, app.exit)
        await app.run_async()

    asyncio.run(main())


def run_tui(own: argparse.Namespace, engine_argv: list[str], log_path: Path) -> int:
    from stepview.engine.engine_args import UsageError, check_option_names
    from stepview.engine.environment import redirect_native_stderr
    from stepview.engine.live import live_driver
    from stepview.engine.sinks import EngineArgsHolder, file_sinks

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
    restore_stderr = redirect_native_stderr(log_path)
    try:
        run_app(driver)
    finally:
        driver.stop(STOP_TIMEOUT_S)
        restore_stderr()
    print(f"stepview: finished requests saved in {results_path}", file=sys.stderr)
    if driver.alive:
        # The engine is stuck in start-up or in a step that will not return; every result is
        # already flushed, so leave without waiting for it.
        print("stepview: the engine did not stop in time; exiting anyway", file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(EXIT_FAILED)
    if isinstance(driver.startup_exception, UsageError):
        return _fail(str(driver.startup_exception))
    return EXIT_FAILED if driver.error else EXIT_OK


__all__ = ["EXIT_USAGE", "run_app", "run_tui"]
