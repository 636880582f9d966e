"""``stepview``: the command line. Builds a snapshot source, then runs the TUI or headless.

Order matters for a fast, clean start: stepview's own flags are parsed without vLLM; the TUI
appears at once and the engine thread does ``import vllm``, parses vLLM's flags and builds
the engine while the loading view says so. Headless mode parses everything up front, so a
bad flag or prompts file stops it before anything runs (exit code 2).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from stepview.cli_args import parse_own_args

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # what a shell reports for a program ended by Ctrl+C

log = logging.getLogger("stepview")


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"stepview: {message}", file=sys.stderr)
    return code


def default_log_path() -> Path:
    from platformdirs import user_log_dir

    return Path(user_log_dir("stepview")) / "stepview.log"


def default_results_path() -> Path:
    from platformdirs import user_data_dir

    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(user_data_dir("stepview")) / "results" / f"results-{stamp}-{os.getpid()}.jsonl"


def _setup_logging(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    # A log write that fails (disk full) must not print a "Logging error" traceback over the
    # TUI or into headless output; the run goes on without that line.
    logging.raiseExceptions = False
    # Libraries' warnings (torch, vLLM) belong in the log, not over the TUI or headless output.
    logging.captureWarnings(True)
    warnings_log = logging.getLogger("py.warnings")
    warnings_log.addHandler(handler)
    warnings_log.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``stepview`` command; returns the exit code.

    Run as the command (``argv`` taken from ``sys.argv``) once vLLM has been loaded, it ends
    the process itself when the run is over (see :func:`_exit_now`).
    """
    try:
        code = _run(argv)
    except KeyboardInterrupt:
        # Ctrl+C before the TUI or the headless loop took over SIGINT (during the seconds of
        # ``import vllm``, say): a one-line goodbye, not a traceback through vLLM's imports.
        code = _fail("interrupted", EXIT_INTERRUPTED)
    if argv is None and "vllm" in sys.modules:
        _exit_now(code)
    return code


def _exit_now(code: int) -> NoReturn:
    """End the process without Python's interpreter teardown.

    With torch and vLLM loaded, the teardown takes ~2 s after everything stepview does is
    over (engine shut down, results and trace closed): quitting would take 3 s instead of
    1, and a slow engine shutdown plus the teardown could pass the 5 s a quit may take.
    Registered exit handlers still run (logging's flush, multiprocessing's clean-up of child
    processes); only the module teardown is skipped.
    """
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(code)


def _run(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args_list or "--help" in args_list:
        return _print_help()
    own, engine_argv = parse_own_args(args_list)
    if own.json and not own.headless:
        return _fail("--json needs --headless")
    if own.replay is None and (own.paused or own.replay_speed != 1.0):
        return _fail("--paused and --replay-speed go with --replay FILE")
    if own.replay is not None:
        if engine_argv:
            return _fail(f"--replay takes no engine flags (got {' '.join(engine_argv)})")
        from stepview.run_replay import run_replay

        return run_replay(own)
    log_path = own.log_file or default_log_path()
    try:
        _setup_logging(log_path)
    except OSError as exc:
        return _fail(f"cannot write the log file {log_path}: {exc.strerror or exc}")
    if own.headless:
        from stepview.headless import run_headless

        return run_headless(own, engine_argv, log_path)
    from stepview.run_tui import run_tui

    return run_tui(own, engine_argv, log_path)


def _print_help() -> int:
    from stepview.engine.environment import prepare_vllm_environment

    prepare_vllm_environment(default_log_path())
    from stepview.engine.engine_args import full_parser

    full_parser().print_help()
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
