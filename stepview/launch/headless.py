"""``stepview --headless``: vLLM's llm_engine_example, run by the same driver as the TUI.

With no prompts file it submits the example's three prompts with their exact sampling
parameters, one per step as the example does, and prints every finished request in the form
of vLLM's ``RequestOutput`` followed by a line of dashes (all n samples, where vLLM's own
final output shows only the last). ``--json`` prints one JSON object per line instead.

Printing happens on the driver thread, between two steps, one whole line (or block) at a
time and flushed, so a shutdown by Ctrl+C or SIGTERM never leaves half a JSON line; requests
it leaves unfinished are counted on stderr and recorded in the results file (``--results``),
not printed. Rejected requests are reported on stderr; the exit code is 0 when every request
finished, 1 when any was rejected or the engine failed, 2 for a usage error.

At the end, the run's latency percentiles, preemptions and alerts go to stderr (see
:mod:`stepview.insight.report`); each JSON record also carries the request's ``timeline``
and ``preemptions``.

An engine that does not stop within the deadline (hung, or its engine-core process stopped)
is given up on as in the TUI (:mod:`stepview.launch.stuck`): the results file gets every
request, its processes are killed, the exit line says so, and the exit code is 1.

Like any Unix filter, a reader that goes away (``stepview --headless | head -1``) ends the run
at once and quietly: the engine is shut down, the results file keeps every request, and the
exit code is the shell's for a filter stopped by a closed pipe (141).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from stepview.engine.driver.loop import Driver
from stepview.files.prompts_file import PromptsFileError, prompt_commands
from stepview.files.records import Annotate, format_request_output, request_record
from stepview.insight.report import format_summary
from stepview.launch.compose import own_driver
from stepview.launch.exits import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_OK,
    exit_now,
    fail,
    notice,
    silence,
    stop_on_signals,
    unfinished_note,
)
from stepview.launch.flight import flight_signal, own_core_stacks
from stepview.launch.outputs import RunOutputs, open_outputs, run_insight
from stepview.launch.stuck import end_leftovers, give_up_on_engine, in_start_up
from stepview.model.commands import AddRequest, Command, Schedule
from stepview.model.errors import describe
from stepview.model.flight import FlightControl
from stepview.model.load import plan_load
from stepview.model.outside_text import json_line, terminal_line, terminal_text
from stepview.model.prompts import seed_requests
from stepview.model.snapshot import EngineState, RequestState, RequestView, StepSnapshot
from stepview.model.source import STOP_TIMEOUT_S
from stepview.run.spec import RunSpec

if TYPE_CHECKING:
    from stepview.engine.own.processes import EngineProcesses

DASHES = "-" * 50


class HeadlessPrinter:
    """A driver sink that prints finished requests and tells when all are done."""

    error: str | None = None
    """Always None: a reader that went away (:attr:`pipe_closed`) ends the run quietly, it is
    not a failure to report."""

    def __init__(
        self,
        expected: int | None,
        *,
        json_lines: bool,
        out: TextIO,
        err: TextIO,
        annotate: Annotate | None = None,
        awaited: Collection[str] | None = None,
    ) -> None:
        """``expected``: how many requests end the run (``None``: the run ends otherwise, as a
        watched server's does); with ``awaited``, only requests of those ids count (a watched
        server finishes other clients' requests too). ``annotate`` adds fields to each JSON
        record (the run insight's timeline)."""
        self.expected = expected
        self.awaited = None if awaited is None else frozenset(awaited)
        self.annotate = annotate
        self.json_lines = json_lines
        self.out = out
        self.err = err
        self.seen = 0
        self.rejected = 0
        self.failed = 0
        self.pipe_closed = False
        """The reader of ``out`` went away: nothing more is printed and the run should end."""
        self.done = threading.Event()

    def begin(self) -> None:
        """The engine is up: start the output (vLLM's example prints a line of dashes first).
        Not earlier, so a run that cannot start prints nothing on stdout."""
        if not self.json_lines:
            self._write(DASHES)

    def _write(self, text: str) -> None:
        """One record (a JSON line, or vLLM's text) on ``out``: the names and texts in it
        came from outside, so a JSON line escapes what a terminal would obey and the text
        shows it harmless (:mod:`stepview.model.outside_text`)."""
        if self.pipe_closed:
            return
        text = json_line(text) if self.json_lines else terminal_text(text)
        try:
            self.out.write(text + "\n")
            self.out.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        """Stop printing and end the run; point ``out``'s descriptor at /dev/null so the text
        still buffered cannot raise again when the stream is flushed at exit."""
        self.pipe_closed = True
        self.done.set()
        silence(self.out)

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        for view in finished:
            if view.state is RequestState.UNFINISHED:
                continue  # the run is over: counted in the exit line, kept in the results
            if self.awaited is None or view.request_id in self.awaited:
                self.seen += 1
                if self.awaited is not None and view.state is not RequestState.FINISHED:
                    self.failed += 1  # one of its own prompts, rejected or lost
            if view.state is RequestState.REJECTED:
                self.rejected += 1
                with contextlib.suppress(OSError, ValueError):
                    rejected = f"request {view.request_id} rejected: {view.error}"
                    self.err.write(f"stepview: {terminal_line(rejected)}\n")
                    self.err.flush()
                if not self.json_lines:
                    continue
            if self.json_lines:
                self._write(json.dumps(request_record(view, self.annotate), ensure_ascii=False))
            else:
                self._write(f"{format_request_output(view)}\n{DASHES}")
        if snapshot.engine_state is EngineState.ERROR or (
            self.expected is not None and self.seen >= self.expected
        ):
            self.done.set()

    def close(self) -> None:
        self.done.set()


def starting_commands(spec: RunSpec, seed: list[AddRequest]) -> list[Command]:
    """What a run starts with: the prompts file's requests (or ``seed`` when there is neither
    a file nor a load), then the synthetic load as one :class:`Schedule`.

    Raises :class:`PromptsFileError` for a prompts file that cannot be used.
    """
    commands: list[Command] = []
    if spec.feed.prompts is not None:
        commands.extend(prompt_commands(spec.feed.prompts))
    load = spec.feed.load
    if load is not None:
        commands.append(Schedule(plan_load(load)))
    elif spec.feed.prompts is None:
        commands.extend(seed)
    return commands


def request_count(commands: Sequence[Command]) -> int:
    """How many requests ``commands`` add, now or when they arrive."""
    return sum(len(c.arrivals) if isinstance(c, Schedule) else 1 for c in commands)


@dataclass(frozen=True, slots=True)
class Feed:
    """What a headless run sends, when not what its flags say: a rerun's workload
    (:mod:`stepview.launch.rerun`), with what the run's files say of it."""

    requests: list[Command]
    annotate: Annotate  # more fields for each request's record (JSON and results file)
    header: Mapping[str, Any]  # more fields for the trace's header
    quiet: bool = False  # print no request on stdout (what follows the run is the output)


def run_headless(spec: RunSpec, log_path: Path, feed: Feed | None = None) -> int:
    """Run the prompts (``feed``'s requests, if given) through the engine without a TUI; see
    the module docstring.

    Everything that can be judged without the engine (prompts, output paths: checked by the
    command line, engine flags, the model) is judged before it starts, so a mistake costs no
    engine start and prints nothing on stdout.
    """
    from stepview.engine.own.engine_args import EngineArgsHolder, UsageError, parse_engine_args
    from stepview.engine.own.environment import prepare_vllm_environment, redirect_native_stderr
    from stepview.engine.own.processes import EngineProcesses

    try:
        requests = starting_commands(spec, seed_requests()) if feed is None else feed.requests
    except PromptsFileError as exc:
        return fail(str(exc))
    prepare_vllm_environment(log_path)
    restore_stderr = redirect_native_stderr(log_path)
    try:
        try:
            parsed = parse_engine_args(
                list(spec.engine.argv), say=lambda text: _say(sys.stderr, f"stepview: {text}")
            )
        except UsageError as exc:
            return fail(exc.message(also_known=list(spec.engine.own_flags)))
        except Exception as exc:  # vLLM that cannot be imported, a demo model that cannot be built
            logging.getLogger("stepview").exception("preparing the engine failed")
            return fail(f"cannot start the engine: {describe(exc)}", EXIT_FAILED)
        holder = EngineArgsHolder(parsed)
        insight = run_insight(spec)
        header, annotate = fed_fields(feed, holder.header_fields, insight.request_fields)
        outputs = open_outputs(spec, header, insight, default_results=False, annotate=annotate)
        if isinstance(outputs, int):
            return outputs
        printer = HeadlessPrinter(
            request_count(requests),
            json_lines=spec.front.json,
            out=outputs.printing_to(quiet=feed is not None and feed.quiet),
            err=sys.stderr,
            annotate=annotate,
        )
        admit = spec.limits.admit_per_step
        if admit is None:  # a load paces itself by its arrivals; the example, one per step
            admit = 0 if spec.feed.load is not None else 1
        processes = EngineProcesses()
        close_stacks = own_core_stacks(outputs.flight)
        try:
            driver = own_driver(
                spec,
                log_path,
                holder=holder,
                outputs=outputs,
                sinks=[printer],
                history=1,
                admit_per_step=admit,
                insight=insight,
                processes=processes,
            )
            code, completed = drive(
                driver,
                requests,
                printer,
                outputs.results,
                processes=processes,
                flight=outputs.flight,
            )
            code = finish_run(driver, outputs, code, completed)
        finally:
            close_stacks()
        if driver.alive:  # given up on: exit handlers would wait on the engine thread's objects
            exit_now(code, run_exit_handlers=False)
        return code
    finally:
        restore_stderr()


def fed_fields(
    feed: Feed | None, header: Callable[[], Mapping[str, Any]], annotate: Annotate
) -> tuple[Callable[[], Mapping[str, Any]], Annotate]:
    """The trace header's fields and each record's, with ``feed``'s added to the run's own."""
    if feed is None:
        return header, annotate

    def fed_header() -> Mapping[str, Any]:
        return {**header(), **feed.header}

    def fed_annotate(request_id: str) -> Mapping[str, Any]:
        return {**annotate(request_id), **feed.annotate(request_id)}

    return fed_header, fed_annotate


def finish_run(driver: Driver, outputs: RunOutputs, code: int, completed: bool) -> int:
    """After :func:`drive`: the exports, the latency table on stderr, files that failed."""
    insight = driver.insight
    outputs.report_files()
    errors = outputs.finish(insight, driver.latest())
    if completed and not errors:
        # Only after a run that went to its end: an interrupted or failed one says why in
        # one line, and a closed pipe ends quietly.
        _say(sys.stderr, format_summary(insight.summary()))
    for error in errors:
        code = fail(error, EXIT_FAILED)
    return code


def _say(stream: TextIO, text: str) -> None:
    """One block of text on ``stream`` (made harmless), flushed; a stream gone away is not
    an error."""
    with contextlib.suppress(OSError, ValueError):
        stream.write(terminal_text(text) + "\n")
        stream.flush()


def drive(
    driver: Driver,
    requests: Sequence[Command],
    printer: HeadlessPrinter,
    results: Path | None,
    *,
    watching: bool = False,
    reached: Callable[[], bool] = lambda: True,
    processes: EngineProcesses | None = None,
    flight: FlightControl | None = None,
) -> tuple[int, bool]:
    """Run until every request is printed, the engine fails, the reader of stdout goes away,
    or a signal asks to stop.

    The requests are handed over once the engine is up: an engine that cannot start is one
    message, not one rejection per request followed by the same message again. Returns the
    exit code and whether the run went to its end (every request printed, no stop, no failure).
    ``watching`` (an attached server): a signal is how the run ends, not an interruption,
    unless the server was never ``reached`` or its own prompts were not all answered.

    A signal the process was started ignoring stays ignored: under ``nohup`` a hang-up
    must not end the run. An engine still running at the stop deadline is given up on
    (``processes``: the engine's, killed then); that makes the exit code 1 at least.
    """
    stack = contextlib.ExitStack()
    stop = stack.enter_context(stop_on_signals())

    def running() -> bool:
        return not stop.is_set() and driver.alive

    try:
        stack.enter_context(flight_signal(flight))  # SIGUSR1: a flight recording
        driver.start()
        while running() and driver.latest().engine_state is EngineState.STARTING:
            stop.wait(0.05)
        if running() and driver.error is None:
            printer.begin()
            for request in requests:
                driver.send(request)
            while not printer.done.wait(0.1) and running():
                pass
    finally:
        driver.stop(STOP_TIMEOUT_S)
        stack.close()
    if driver.alive and in_start_up(driver):  # stopped while the engine was being built
        give_up_on_engine(driver, processes)  # as in the main thread's part of start-up:
        note = unfinished_note(driver.unfinished, results)
        note = f" ({note})" if note else ""
        code = EXIT_FAILED if stop.signum is None else 128 + stop.signum
        return fail(f"stopped by {stop.name} during start-up{note}", code), False
    if driver.alive:
        stuck = give_up_on_engine(driver, processes)
        code, completed = _outcome(driver, printer, results, stop.is_set(), watching, reached)
        notice(stuck)
        return (code if code != EXIT_OK else EXIT_FAILED), completed
    end_leftovers(processes)
    return _outcome(driver, printer, results, stop.is_set(), watching, reached)


def _outcome(
    driver: Driver,
    printer: HeadlessPrinter,
    results: Path | None,
    stopped: bool,
    watching: bool,
    reached: Callable[[], bool],
) -> tuple[int, bool]:
    """:func:`drive`'s exit code and whether the run went to its end, its lines on stderr."""
    if printer.pipe_closed:
        return EXIT_BROKEN_PIPE, False
    if driver.error:
        return fail(driver.error, EXIT_FAILED), False
    note = unfinished_note(driver.unfinished, results)
    note = f" ({note})" if note else ""
    if stopped and watching and not reached():
        return fail("stopped watching: nothing ever came from the server", EXIT_FAILED), False
    expected = printer.expected
    if stopped and watching and (expected is None or printer.seen >= expected):
        notice("stopped watching" + note)
        return (EXIT_FAILED if printer.rejected or printer.failed else EXIT_OK), True
    if stopped:
        return fail(f"interrupted; requests that finished were printed{note}", EXIT_FAILED), False
    return (EXIT_FAILED if printer.rejected or printer.failed else EXIT_OK), True
