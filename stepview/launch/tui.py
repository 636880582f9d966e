"""The default ``stepview`` command: the TUI on a live engine.

The app is up before vLLM is even imported (the engine thread does that), so a bad engine
flag that only vLLM's parser can name is caught early from a cached list of vLLM's option
names when there is one. Otherwise the engine thread's parse fails after the app started:
the app then leaves by itself and the one-line usage message is printed on the restored
terminal, with exit code 2, exactly as if the flag had been caught up front.

However the app ends (``q``, Ctrl+C, a signal: see :mod:`stepview.launch.runner`), every
finished request is already in the results file, the ones still pending or running are added
to it as ``unfinished``, and the file is named on the way out with how many were unfinished.
An engine that has not stopped by the deadline is given up on (:mod:`stepview.launch.stuck`):
the run ends without it, its processes are killed, and the process exits at once, code 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from stepview.files.prompts_file import PromptsFileError
from stepview.launch.compose import own_driver
from stepview.launch.exits import EXIT_FAILED, EXIT_OK, exit_now, fail, notice
from stepview.launch.flight import own_core_stacks
from stepview.launch.headless import starting_commands
from stepview.launch.outputs import RunOutputs, open_outputs, run_insight
from stepview.launch.runner import run_app
from stepview.launch.stuck import end_leftovers, give_up_on_engine, in_start_up
from stepview.launch.terminal import claim_terminal
from stepview.run.spec import RunSpec

if TYPE_CHECKING:
    from stepview.engine.driver.loop import Driver
    from stepview.engine.own.processes import EngineProcesses


def run_tui(spec: RunSpec, log_path: Path) -> int:
    """Run the TUI on vLLM built from ``spec.engine``'s flags; returns the exit code."""
    from stepview.engine.own.engine_args import EngineArgsHolder, UsageError, check_option_names
    from stepview.engine.own.environment import redirect_native_stderr
    from stepview.engine.own.processes import EngineProcesses

    try:
        engine_argv = list(spec.engine.argv)
        check_option_names(engine_argv)
        requests = starting_commands(spec, seed=[])
    except UsageError as exc:
        return fail(exc.message(also_known=list(spec.engine.own_flags)))
    except PromptsFileError as exc:
        return fail(str(exc))
    problem = claim_terminal("; use --headless to run without the TUI")
    if problem is not None:
        return fail(problem)
    holder = EngineArgsHolder()
    insight = run_insight(spec)
    outputs = open_outputs(spec, holder.header_fields, insight, default_results=True)
    if isinstance(outputs, int):
        return outputs
    admit = 0 if spec.limits.admit_per_step is None else spec.limits.admit_per_step
    processes = EngineProcesses()
    close_stacks = own_core_stacks(outputs.flight)
    # Before the driver: the helper process it starts (multiprocessing's resource tracker)
    # keeps this fd 2 as its stderr, and it warns there after a killed engine core, once
    # stepview has left: into the log, not onto the user's shell prompt.
    restore_stderr = redirect_native_stderr(log_path)
    try:
        driver = own_driver(
            spec,
            log_path,
            holder=holder,
            outputs=outputs,
            history=None,
            admit_per_step=admit,
            insight=insight,
            processes=processes,
        )
        for request in requests:
            driver.send(request)  # queued; they join once the engine is up

        def usage_error() -> UsageError | None:
            exc = driver.startup_exception
            return exc if isinstance(exc, UsageError) else None

        app_code = run_app(
            driver, exit_when=lambda: usage_error() is not None, flight=outputs.flight
        )
    finally:
        restore_stderr()
        close_stacks()  # before wrap_up, which may leave at once (an engine given up on)
    usage = usage_error()
    if usage is not None:
        outputs.discard()
        return fail(usage.message(also_known=list(spec.engine.own_flags)))
    return wrap_up(driver, outputs, log_path, app_code, processes)


def wrap_up(
    driver: Driver,
    outputs: RunOutputs,
    log_path: Path,
    app_code: int,
    processes: EngineProcesses | None = None,
) -> int:
    """After the app: name the results file, write the exports the flags ask for
    (``--export-csv``, ``--export-chrome-trace``, from the driver's insight), report what
    went wrong; the exit code. ``processes``: the engine's, ended if it did not stop."""
    if driver.alive:
        # The engine is stuck in start-up or in a step that will not return: end the run
        # without it (every request recorded), kill its processes, and leave without
        # waiting for it (nor exporting from its state).
        starting = in_start_up(driver)
        stuck = give_up_on_engine(driver, processes)
        outputs.report_results(driver.unfinished)
        for error in outputs.file_errors():
            notice(error)
        notice(stuck)
        exit_now(EXIT_OK if starting else EXIT_FAILED, run_exit_handlers=False)
    end_leftovers(processes)
    outputs.report_results(driver.unfinished)
    if driver.error:
        notice(f"{driver.error} (details in {log_path})")
    file_errors = outputs.finish(driver.insight, driver.latest())
    for error in file_errors:
        notice(error)
    return EXIT_FAILED if driver.error or app_code or file_errors else EXIT_OK
