"""``stepview``: the command line. Parses stepview's own flags, refuses those that cannot go
together (:mod:`stepview.cli.conflicts`), makes the run's specs and hands them to the
composition root (:mod:`stepview.launch.root`), which builds the run.

Order matters for a fast, clean start: stepview's own flags are parsed without vLLM, and each
mode of :mod:`stepview.launch` is imported only when chosen. The TUI appears at once and the
engine thread does ``import vllm``, parses vLLM's flags and builds the engine while the loading
view says so. Headless mode parses everything up front, so a bad flag or prompts file stops
it before anything runs (exit code 2). A replay never imports vLLM.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from stepview.cli.args import parse_own_args
from stepview.cli.attach import AddressError
from stepview.cli.conflicts import flag_conflict
from stepview.cli.specs import run_spec
from stepview.launch.exits import EXIT_INTERRUPTED, exit_now, fail
from stepview.launch.signals_between import StopAsked, answer_signals, stopping
from stepview.outputs.watching import FLIGHT
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
        from stepview.cli.args import help_parser
        from stepview.launch.help import print_help

        return print_help(help_parser().format_help())
    own, engine_argv = parse_own_args(args_list)
    if argv is None:
        answer_signals(recorder=FLIGHT.given(own.outputs))
    problem = flag_conflict(own, engine_argv)
    if problem is not None:
        return fail(problem)
    try:
        spec = run_spec(own, engine_argv)
    except AddressError as exc:
        return fail(str(exc))
    from stepview.launch.root import run

    return run(spec)
