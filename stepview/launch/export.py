"""``--export-csv OUT.csv`` and ``--export-chrome-trace OUT.json``, from a live run or a trace;
``--export-workload [vllm:]FILE`` from a trace.

The CSV and the Chrome trace are written once, at the end (every request by then is finished,
rejected, aborted or unfinished), so a file is complete or absent: the CSV from the last
snapshot (or, for a run longer than memory keeps, from its results file), the Chrome
trace from the run insight's timelines and step figures. A replay export reads the whole
trace without drawing anything and without vLLM, feeding its snapshots through the same
insight the live run had: a trace from a GPU box becomes a spreadsheet or a Perfetto
timeline on a laptop. The workload (:mod:`stepview.files.workload_export`) is the trace's
requests as another run sends them: stepview's ``--prompts``, or vLLM's benchmark.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from stepview.files.csv_export import export_results, export_snapshot
from stepview.files.workload_export import timed_trace_command, workload_target, write_workload
from stepview.insight.alerts import Thresholds
from stepview.insight.chrome_trace import export_timelines
from stepview.insight.run import RunInsight
from stepview.launch.exits import EXIT_FAILED, EXIT_OK, fail, notice
from stepview.launch.paths import check_output_paths
from stepview.launch.summary import summarize
from stepview.model.recent import Finished
from stepview.model.snapshot import StepSnapshot
from stepview.run.spec import RunSpec
from stepview.trace.format import TraceError
from stepview.trace.reader import load_trace
from stepview.trace.workload import Workload, workload_of


def export_csv(
    path: Path | None, snapshot: StepSnapshot, results: tuple[Path, int] | None = None
) -> str | None:
    """Write the run's requests to ``path`` (if asked) and say so; why not, if it failed.

    From ``snapshot`` while it still holds every request of the run; from the run's results
    file (``results``: its path and where the run began in it) once the oldest finished
    ones are no longer kept in memory (model.recent). Without a results file, what memory
    holds, and a line that says how many are missing.
    """
    if path is None:
        return None
    older = snapshot.finished.older if isinstance(snapshot.finished, Finished) else 0
    try:
        if older and results is not None:
            rows = export_results(path, *results)
        else:
            rows = export_snapshot(path, snapshot)
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    notice(f"{rows} request(s) exported to {path}")
    if older and results is None:
        notice(
            f"the {older} oldest finished requests were no longer in memory (--results keeps all)"
        )
    return None


def export_chrome_trace(
    path: Path | None, insight: RunInsight, snapshot: StepSnapshot
) -> str | None:
    """Write the run's timelines and step figures to ``path`` (if asked) as a Chrome trace
    and say so; why not, if it failed. ``insight`` must keep its steps (``keep_steps``)."""
    if path is None:
        return None
    points = insight.step_series.points if insight.step_series is not None else []
    try:
        tracks = export_timelines(
            path, insight.timelines, points, snapshot.info.label or "stepview"
        )
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    notice(f"{tracks} request track(s) exported to {path} (open it in ui.perfetto.dev)")
    return None


def exports_insight(spec: RunSpec) -> RunInsight:
    """The run insight for a live run: keeping every step's figures if a Chrome trace is
    to be written at the end, as many finished timelines as finished requests are kept,
    watching for requests stuck in the queue if ``--stuck-after`` asks."""
    return RunInsight(
        Thresholds(stuck_after=spec.limits.stuck_after),
        keep_steps=spec.outputs.export_chrome_trace is not None,
        keep_done=spec.limits.keep_finished,
    )


def export_run(
    csv_path: Path | None,
    chrome_path: Path | None,
    insight: RunInsight,
    snapshot: StepSnapshot,
    results: tuple[Path, int] | None = None,
) -> list[str]:
    """Every export a run's flags ask for, at its end; what went wrong (one line each).
    ``results``: the run's results file and where the run began in it, if it wrote one."""
    errors = [
        export_csv(csv_path, snapshot, results),
        export_chrome_trace(chrome_path, insight, snapshot),
    ]
    return [error for error in errors if error is not None]


def export_replay(
    trace_path: Path,
    csv_path: Path | None,
    chrome_path: Path | None,
    workload_targets: Sequence[str] = (),
) -> int:
    """``--replay TRACE`` with ``--export-csv OUT.csv``, ``--export-chrome-trace OUT.json``
    and/or ``--export-workload [vllm:]FILE``: the trace exported without the TUI; the exit
    code."""
    targets = [workload_target(text) for text in workload_targets]
    named = {"--export-csv": csv_path, "--export-chrome-trace": chrome_path}
    named.update(
        {
            f"--export-workload {text}": path
            for text, (_, path) in zip(workload_targets, targets, strict=True)
        }
    )
    problem = check_output_paths(named)
    if problem is not None:
        return fail(problem)
    try:
        trace = load_trace(trace_path)
    except TraceError as exc:
        return fail(str(exc))
    snapshots = trace.snapshots
    if not len(snapshots):
        return fail(f"{trace_path}: the trace holds no step to export")
    if trace.warning:
        notice(f"{trace_path}: {trace.warning}")
    errors: list[str] = []
    if csv_path is not None or chrome_path is not None:
        # The insight (a pass over every snapshot) only when the Chrome trace needs it.
        insight = summarize(trace, keep_steps=True) if chrome_path is not None else RunInsight()
        errors = export_run(csv_path, chrome_path, insight, snapshots[len(snapshots) - 1])
    if targets:
        errors += export_workloads(trace_path, workload_of(trace), targets)
    for error in errors:
        fail(error, EXIT_FAILED)
    return EXIT_FAILED if errors else EXIT_OK


def export_workloads(
    trace_path: Path, workload: Workload, targets: Sequence[tuple[bool, Path]]
) -> list[str]:
    """Write ``workload`` to each target (vLLM's format or stepview's, and the file), naming
    each file written, the requests it leaves out and how vLLM's benchmark replays it; what
    went wrong (one line each)."""
    errors = []
    for vllm, path in targets:
        try:
            count, skipped = write_workload(path, workload, vllm=vllm, source=str(trace_path))
        except OSError as exc:
            errors.append(f"cannot write {path}: {exc.strerror or exc}")
            continue
        for left_out in skipped:
            notice(f"{left_out.request_id} left out of {path}: {left_out.why}")
        if vllm:
            notice(f"{count} request(s) of the workload exported to {path} for vLLM's benchmark:")
            notice(f"  {timed_trace_command(path, count, workload.block_size)}")
        else:
            forced = len(workload.forced)
            held = f" ({forced} held to their recorded length)" if forced else ""
            notice(f"{count} request(s) of the workload exported to {path}{held}")
    return errors
