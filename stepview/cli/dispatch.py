"""``stepview``: the command line. Parses stepview's own flags, refuses those that cannot go
together (:mod:`stepview.cli.conflicts`) and dispatches to a mode.

Order matters for a fast, clean start: stepview's own flags are parsed without vLLM, and each
mode of :mod:`stepview.launch` is imported only when chosen. The TUI appears at once and the
engine thread does ``import vllm``, parses vLLM's flags and builds the engine while the loading
view says so. Headless mode parses everything up front, so a bad flag or prompts file stops
it before anything runs (exit code 2). A replay never imports vLLM.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from stepview.cli.args import parse_own_args
from stepview.cli.attach import is_metrics_address
from stepview.cli.conflicts import flag_conflict
from stepview.launch.exits import EXIT_INTERRUPTED, exit_now, fail
from stepview.launch.signals_between import StopAsked, answer_signals, stopping
from stepview.version import DISTRIBUTION, installed_version


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``stepview`` command; returns the exit code.

    Run as the command (``argv`` taken from ``sys.argv``) once vLLM has been loaded, it ends
    the process itself when the run is over (see :func:`~stepview.launch.exits.exit_now`).
    """
    command = argv is None
    if command:
        answer_signals()  # first: their defaults end the process (launch/signals_between.py)
    try:
        code = _run(argv)
    except KeyboardInterrupt:
        # Ctrl+C before the TUI or the headless loop took over SIGINT (during the seconds of
        # ``import vllm``, say): a one-line goodbye, not a traceback through vLLM's imports.
        code = fail("interrupted", EXIT_INTERRUPTED)
    except StopAsked as stop:  # SIGTERM or SIGHUP before a mode took them: the same, named
        code = fail(f"stopped by {stop.name} during start-up", 128 + stop.signum)
    if command:
        stopping()
    if command and "vllm" in sys.modules:
        exit_now(code)
    return code


def _run(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list == ["--version"]:
        print(f"stepview {installed_version()} ({DISTRIBUTION})")
        return 0
    if args_list[:1] == ["check"]:  # the one subcommand: a look at this environment
        from stepview.launch.check import run_check

        return run_check(args_list[1:])
    if "-h" in args_list or "--help" in args_list:
        from stepview.launch.help import print_help

        return print_help()
    own, engine_argv = parse_own_args(args_list)
    if argv is None:
        answer_signals(recorder=own.flight_recorder is not None)
    problem = flag_conflict(own, engine_argv)
    if problem is not None:
        return fail(problem)
    if own.replay is not None:
        if own.events is not None:  # the trace's events, then exit (launch/events.py)
            from stepview.launch.events import replay_events

            return replay_events(own.replay, own.events)
        if own.compare is not None:
            from stepview.launch.compare import run_compare

            return run_compare(own.replay, own.compare, summary=own.summary)
        if own.summary:
            from stepview.launch.summary import run_summary

            return run_summary(own.replay)
        if own.export_csv is not None or own.export_chrome_trace is not None or own.export_workload:
            from stepview.launch.export import export_replay

            return export_replay(
                own.replay, own.export_csv, own.export_chrome_trace, own.export_workload or ()
            )
        from stepview.launch.replay import run_replay

        return run_replay(own.replay, speed=own.replay_speed, paused=own.paused)
    from stepview.launch.logs import setup_logging
    from stepview.launch.paths import check_output_paths, default_log_path

    outputs = {
        "--log-file": own.log_file,
        "--results": own.results,
        "--record": own.record,
        "--export-csv": own.export_csv,
        "--export-chrome-trace": own.export_chrome_trace,
    }
    if own.events is not None:  # the event stream's files, checked with the others
        files = [d for d in own.events.destinations if d.path]
        outputs.update({f"--events {d.text}": Path(d.path) for d in files})
    problem = check_output_paths(outputs)
    if problem is not None:
        return fail(problem)
    log_path = own.log_file or default_log_path()
    try:
        setup_logging(log_path)
    except OSError as exc:
        return fail(f"cannot write the log file {log_path}: {exc.strerror or exc}")
    if own.is_fleet:
        from stepview.launch.fleet import run_fleet

        return run_fleet(own, log_path)
    if is_metrics_address(own.attach):
        from stepview.launch.attach_metrics import run_metrics_attach

        return run_metrics_attach(own, log_path)
    if own.attach is not None:
        from stepview.launch.attach import run_attach

        return run_attach(own, log_path)
    if own.rerun is not None:
        from stepview.launch.rerun import run_rerun

        return run_rerun(own, engine_argv, log_path)
    if own.headless:
        from stepview.launch.headless import run_headless

        return run_headless(own, engine_argv, log_path)
    from stepview.launch.tui import run_tui

    return run_tui(own, engine_argv, log_path)
