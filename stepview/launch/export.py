"""``--replay TRACE`` with outputs written from a trace (``--export-csv``,
``--export-chrome-trace``, ``--export-workload``...): the trace read once, without the TUI
and without vLLM, and each output the registry writes from a trace given it.

A replay export reads the whole trace without drawing anything, feeding its snapshots
through the same insight the live run had (made once, and only when an output needs it), so
a trace from a GPU box becomes a spreadsheet or a Perfetto timeline on a laptop.
"""

from __future__ import annotations

import functools

from stepview.insight.run import RunInsight
from stepview.launch.exits import EXIT_FAILED, EXIT_OK, fail, notice, stop_on_signals
from stepview.launch.summary import summarize
from stepview.outputs.entry import FromTrace
from stepview.outputs.paths import check_output_paths
from stepview.outputs.registry import output_paths, trace_outputs
from stepview.run.spec import RunSpec
from stepview.trace.format import TraceError
from stepview.trace.reader import load_trace


def export_replay(spec: RunSpec) -> int:
    """Write every output asked for from the trace of ``spec.replay``; the exit code."""
    assert spec.replay is not None
    trace_path = spec.replay.path
    problem = check_output_paths(output_paths(spec.outputs))
    if problem is not None:
        return fail(problem)
    try:
        trace = load_trace(trace_path)
    except TraceError as exc:
        return fail(str(exc))
    if not len(trace.snapshots):
        return fail(f"{trace_path}: the trace holds no step to export")
    if trace.warning:
        notice(f"{trace_path}: {trace.warning}")

    @functools.cache
    def insight() -> RunInsight:  # a pass over every snapshot: only when an output needs it
        return summarize(trace, keep_steps=True)

    source = FromTrace(trace_path, trace, insight, notice, stop_on_signals)
    errors: list[str] = []
    for entry, chosen in trace_outputs(spec.outputs):
        assert entry.from_trace is not None
        errors += entry.from_trace(chosen, source)
    for error in errors:
        fail(error, EXIT_FAILED)
    return EXIT_FAILED if errors else EXIT_OK
