"""``--export-csv OUT.csv``: the run's requests as CSV rows, from a live run or a trace.

The rows are written once, from the last snapshot (every request by then is finished,
rejected, aborted or unfinished), so the file is complete or absent. A replay export reads
the whole trace without drawing anything and without vLLM: a trace from a GPU box becomes a
spreadsheet on a laptop.
"""

from __future__ import annotations

from pathlib import Path

from stepview.launch.exits import EXIT_FAILED, EXIT_OK, fail, notice
from stepview.launch.paths import output_path_problem
from stepview.model.csv_export import export_snapshot
from stepview.model.snapshot import StepSnapshot
from stepview.trace.format import TraceError
from stepview.trace.reader import load_trace


def export_csv(path: Path | None, snapshot: StepSnapshot) -> str | None:
    """Write ``snapshot``'s requests to ``path`` (if asked) and say so; why not, if it failed."""
    if path is None:
        return None
    try:
        rows = export_snapshot(path, snapshot)
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    notice(f"{rows} request(s) exported to {path}")
    return None


def export_replay(trace_path: Path, csv_path: Path) -> int:
    """``--replay TRACE --export-csv OUT.csv``: the trace's last step as CSV; the exit code."""
    problem = output_path_problem(csv_path)
    if problem is not None:
        return fail(f"--export-csv {csv_path}: {problem}")
    try:
        trace = load_trace(trace_path)
    except TraceError as exc:
        return fail(str(exc))
    snapshots = trace.snapshots
    if not len(snapshots):
        return fail(f"{trace_path}: the trace holds no step to export")
    if trace.warning:
        notice(f"{trace_path}: {trace.warning}")
    error = export_csv(csv_path, snapshots[len(snapshots) - 1])
    return EXIT_OK if error is None else fail(error, EXIT_FAILED)
