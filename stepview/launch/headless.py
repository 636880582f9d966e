"""``stepview --headless``: vLLM's llm_engine_example, run by the same driver as the TUI.

With no prompts file it submits the example's three prompts with their exact sampling
parameters, one per step as the example does, and prints every finished request in the form
of vLLM's ``RequestOutput`` followed by a line of dashes (all n samples, where vLLM's own
final output shows only the last). ``--json`` prints one JSON object per line instead.

Printing happens on the driver thread, between two steps, one whole line (or block) at a
time and flushed, so a shutdown by Ctrl+C or SIGTERM never leaves half a JSON line.
Rejected requests are reported on stderr; the exit code is 0 when every request finished,
1 when any was rejected or the engine failed, 2 for a usage error.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TextIO

from stepview.cli_args import OwnOptions, own_option_names
from stepview.engine.driver import Driver
from stepview.launch.exits import EXIT_FAILED, EXIT_OK, fail
from stepview.model.commands import AddRequest, Shutdown
from stepview.model.errors import describe
from stepview.model.prompts import PromptsFileError, read_prompts, seed_requests
from stepview.model.records import format_request_output, request_record
from stepview.model.snapshot import EngineState, RequestState, RequestView, StepSnapshot

DASHES = "-" * 50


class HeadlessPrinter:
    """A driver sink that prints finished requests and tells when all are done."""

    error: str | None = None
    """Always None: a print that fails raises on the driver thread, which ends the run and
    says so itself; nothing is left to report afterwards."""

    def __init__(self, expected: int, *, json_lines: bool, out: TextIO, err: TextIO) -> None:
        self.expected = expected
        self.json_lines = json_lines
        self.out = out
        self.err = err
        self.seen = 0
        self.rejected = 0
        self.done = threading.Event()
        if not json_lines:
            self._write(DASHES)

    def _write(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        for view in finished:
            self.seen += 1
            if view.state is RequestState.REJECTED:
                self.rejected += 1
                self.err.write(f"stepview: request {view.request_id} rejected: {view.error}\n")
                self.err.flush()
                if not self.json_lines:
                    continue
            if self.json_lines:
                self._write(json.dumps(request_record(view), ensure_ascii=False))
            else:
                self._write(f"{format_request_output(view)}\n{DASHES}")
        if snapshot.engine_state is EngineState.ERROR or self.seen >= self.expected:
            self.done.set()

    def close(self) -> None:
        self.done.set()


def run_headless(options: OwnOptions, engine_argv: list[str], log_path: Path) -> int:
    """Run the prompts through the engine without a TUI; see the module docstring."""
    from stepview.engine.engine_args import UsageError, parse_engine_args
    from stepview.engine.environment import prepare_vllm_environment, redirect_native_stderr
    from stepview.engine.live import live_driver
    from stepview.engine.sinks import EngineArgsHolder, file_sinks, sink_errors

    try:
        requests = read_prompts(options.prompts) if options.prompts else seed_requests()
    except PromptsFileError as exc:
        return fail(str(exc))
    prepare_vllm_environment(log_path)
    restore_stderr = redirect_native_stderr(log_path)
    try:
        try:
            parsed = parse_engine_args(engine_argv)
        except UsageError as exc:
            return fail(exc.message(also_known=own_option_names()))
        except Exception as exc:  # vLLM that cannot be imported, a demo model that cannot be built
            logging.getLogger("stepview").exception("preparing the engine failed")
            return fail(f"cannot start the engine: {describe(exc)}", EXIT_FAILED)
        printer = HeadlessPrinter(
            len(requests), json_lines=options.json, out=sys.stdout, err=sys.stderr
        )
        holder = EngineArgsHolder(parsed)
        try:
            files = file_sinks(
                holder.header_fields,
                results=options.results,
                append_results=True,
                record=options.record,
            )
        except OSError as exc:
            return fail(f"cannot open output file: {exc}")
        sinks = [printer, *files]
        admit = 1 if options.admit_per_step is None else options.admit_per_step
        driver = live_driver(
            engine_argv, log_path, holder=holder, sinks=sinks, history_size=1, admit_per_step=admit
        )
        code = _drive(driver, requests, printer)
        for error in sink_errors(sinks):
            code = fail(error, EXIT_FAILED)
        return code
    finally:
        restore_stderr()


def _drive(driver: Driver, requests: Sequence[AddRequest], printer: HeadlessPrinter) -> int:
    """Run until every request is printed, the engine fails, or a signal asks to stop."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {
        sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    }
    try:
        driver.start()
        for request in requests:
            driver.send(request)
        while not printer.done.wait(0.1) and not stop.is_set() and driver.alive:
            pass
    finally:
        driver.send(Shutdown())
        driver.join(5.0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if driver.error:
        return fail(driver.error, EXIT_FAILED)
    if stop.is_set():
        return fail("interrupted; requests that finished were printed", EXIT_FAILED)
    return EXIT_FAILED if printer.rejected else EXIT_OK
