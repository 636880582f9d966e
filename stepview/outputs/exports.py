"""The exports: written once, when a run ends, or from a recorded trace without the TUI
(``--export-csv``, ``--export-chrome-trace``; ``--export-workload`` from a trace only).

Written at the end, every request by then is finished, rejected, aborted or unfinished, so a
file is complete or absent: the CSV from the last snapshot (or, for a run longer than memory
keeps, from its results file), the Chrome trace from the run insight's timelines and step
figures. From a trace, its snapshots go through the same insight the live run had: a trace
from a GPU box becomes a spreadsheet or a Perfetto timeline on a laptop. The workload
(:mod:`stepview.files.workload_export`) is the trace's requests as another run sends them:
stepview's ``--prompts``, or vLLM's benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stepview.outputs.entry import (
    END,
    FINISHED,
    HELP_EXPORTS,
    HELP_WORKLOAD,
    STEPS,
    TRACE,
    Asked,
    Ending,
    Flag,
    FromTrace,
    Opened,
    Opening,
    Output,
    Say,
)
from stepview.outputs.run_files import RESULTS, ResultsFile
from stepview.run.spec import OWN, REPLAY, RERUN, WATCH

if TYPE_CHECKING:
    from stepview.insight.run import RunInsight
    from stepview.model.snapshot import StepSnapshot
    from stepview.trace.workload import Workload

EXPORT_SOURCES = frozenset({OWN, WATCH, RERUN, REPLAY})


class AtTheEnd(Opened):
    """An export, waiting for the run's end: ``write(ending)`` then writes it."""

    def __init__(self, write: Callable[[Ending], str | None]) -> None:
        self.write = write

    def finish(self, ending: Ending) -> list[str]:
        error = self.write(ending)
        return [] if error is None else [error]


def at_the_end(write: Callable[[Path, Ending], str | None]) -> Callable[[Path, Opening], Opened]:
    """The ``open`` of an export to one path: nothing opened before the run, ``write`` at
    its end."""
    return lambda path, opening: AtTheEnd(lambda ending: write(path, ending))


def cannot_write(path: Path, exc: OSError) -> str:
    return f"cannot write {path}: {exc.strerror or exc}"


def export_csv(
    path: Path, snapshot: StepSnapshot, results: tuple[Path, int] | None, say: Say
) -> str | None:
    """Write the run's requests to ``path`` and say so; why not, if it failed.

    From ``snapshot`` while it still holds every request of the run; from the run's results
    file (``results``: its path and where the run began in it) once the oldest finished
    ones are no longer kept in memory (model.recent). Without a results file, what memory
    holds, and a line that says how many are missing.
    """
    from stepview.files.csv_export import export_results, export_snapshot
    from stepview.model.recent import Finished

    older = snapshot.finished.older if isinstance(snapshot.finished, Finished) else 0
    try:
        if older and results is not None:
            rows = export_results(path, *results)
        else:
            rows = export_snapshot(path, snapshot)
    except OSError as exc:
        return cannot_write(path, exc)
    say(f"{rows} request(s) exported to {path}")
    if older and results is None:
        say(f"the {older} oldest finished requests were no longer in memory (--results keeps all)")
    return None


def _csv_at_the_end(path: Path, ending: Ending) -> str | None:
    results = ending.opened.get(RESULTS.name)
    where = (results.path, results.offset) if isinstance(results, ResultsFile) else None
    return export_csv(path, ending.snapshot, where, ending.say)


def _csv_from_trace(path: Path, source: FromTrace) -> list[str]:
    snapshots = source.trace.snapshots
    error = export_csv(path, snapshots[len(snapshots) - 1], None, source.say)
    return [] if error is None else [error]


CSV: Output[Path] = Output(
    name="csv",
    flags=(
        Flag(
            "--export-csv",
            HELP_EXPORTS,
            {
                "type": Path,
                "metavar": "OUT.csv",
                "help": "write one row per request (id, state, arrival, scheduled, first_token, "
                "finished, queue_time, ttft, e2e, prompt_tokens, output_tokens, preemptions, "
                "finish_reason) when the run ends; with --replay FILE: from the trace, then exit "
                "without the TUI",
            },
        ),
    ),
    kind=END,
    sources=EXPORT_SOURCES,
    needs=frozenset({FINISHED}),
    spec=lambda values: values["export_csv"],
    paths=lambda path: {"--export-csv": path},
    open=at_the_end(_csv_at_the_end),
    from_trace=_csv_from_trace,
)


def export_chrome_trace(
    path: Path, insight: RunInsight, snapshot: StepSnapshot, say: Say
) -> str | None:
    """Write the run's timelines and step figures to ``path`` as a Chrome trace and say so;
    why not, if it failed. ``insight`` must keep its steps (``keep_steps``)."""
    from stepview.files.chrome_trace_file import export_timelines

    points = insight.step_series.points if insight.step_series is not None else []
    try:
        tracks = export_timelines(
            path, insight.timelines, points, snapshot.info.label or "stepview"
        )
    except OSError as exc:
        return cannot_write(path, exc)
    say(f"{tracks} request track(s) exported to {path} (open it in ui.perfetto.dev)")
    return None


def _chrome_from_trace(path: Path, source: FromTrace) -> list[str]:
    snapshots = source.trace.snapshots
    last = snapshots[len(snapshots) - 1]
    error = export_chrome_trace(path, source.insight(), last, source.say)
    return [] if error is None else [error]


CHROME_TRACE: Output[Path] = Output(
    name="chrome trace",
    flags=(
        Flag(
            "--export-chrome-trace",
            HELP_EXPORTS,
            {
                "type": Path,
                "metavar": "OUT.json",
                "help": "write the run as a Chrome trace for ui.perfetto.dev or chrome://tracing "
                "when it ends: a track per request (waiting, prefill, decode, preempted spans), "
                "counters for KV cache usage, running, waiting and tokens per step; with --replay "
                "FILE: from the trace, then exit without the TUI",
            },
        ),
    ),
    kind=END,
    sources=EXPORT_SOURCES,
    needs=frozenset({STEPS}),
    spec=lambda values: values["export_chrome_trace"],
    paths=lambda path: {"--export-chrome-trace": path},
    open=at_the_end(
        lambda path, ending: export_chrome_trace(path, ending.insight, ending.snapshot, ending.say)
    ),
    from_trace=_chrome_from_trace,
)


def _workload_paths(texts: tuple[str, ...]) -> dict[str, Path]:
    from stepview.files.workload_export import workload_target

    return {f"--export-workload {text}": workload_target(text)[1] for text in texts}


def export_workloads(
    trace_path: Path, workload: Workload, targets: Sequence[tuple[bool, Path]], say: Say
) -> list[str]:
    """Write ``workload`` to each target (vLLM's format or stepview's, and the file), naming
    each file written, the requests it leaves out and how vLLM's benchmark replays it; what
    went wrong (one line each)."""
    from stepview.files.workload_export import timed_trace_command, write_workload

    errors = []
    for vllm, path in targets:
        try:
            count, skipped = write_workload(path, workload, vllm=vllm, source=str(trace_path))
        except OSError as exc:
            errors.append(cannot_write(path, exc))
            continue
        for left_out in skipped:
            say(f"{left_out.request_id} left out of {path}: {left_out.why}")
        if vllm:
            say(f"{count} request(s) of the workload exported to {path} for vLLM's benchmark:")
            say(f"  {timed_trace_command(path, count, workload.block_size)}")
        else:
            forced = len(workload.forced)
            held = f" ({forced} held to their recorded length)" if forced else ""
            say(f"{count} request(s) of the workload exported to {path}{held}")
    return errors


def _workload_from_trace(texts: tuple[str, ...], source: FromTrace) -> list[str]:
    from stepview.files.workload_export import workload_target
    from stepview.trace.workload import workload_of

    targets = [workload_target(text) for text in texts]
    return export_workloads(source.path, workload_of(source.trace), targets, source.say)


def _workload_refused(texts: tuple[str, ...], asked: Asked) -> str | None:
    if asked.replay is None:
        return "--export-workload goes with --replay TRACE: the workload of a recorded run"
    return None


WORKLOAD: Output[tuple[str, ...]] = Output(
    name="workload",
    flags=(
        Flag(
            "--export-workload",
            HELP_WORKLOAD,
            {
                "action": "append",
                "metavar": "FILE",
                "help": "with --replay TRACE: write its workload as a prompts file for --prompts "
                '(each request with "at", its arrival), or with vllm:FILE as the timed_trace '
                "dataset of vLLM's benchmark (vllm bench serve --dataset-name timed_trace); "
                "repeat for both",
            },
        ),
    ),
    kind=END,
    sources=frozenset({REPLAY}),
    needs=frozenset({TRACE}),
    spec=lambda values: tuple(values["export_workload"] or ()) or None,
    refuse=_workload_refused,
    paths=_workload_paths,
    from_trace=_workload_from_trace,
)

ENTRIES: tuple[Output[Any], ...] = (CSV, CHROME_TRACE, WORKLOAD)
"""This module's entries, in the registry's order."""
