"""``stepview --replay TRACE --summary``: a recorded run's figures as text, without the TUI.

The trace's snapshots go through the same :class:`~stepview.insight.run.RunInsight` the
driver ran live, so the latency table, preemptions and alerts are those the live run
reported. Nothing here imports vLLM or Textual (a test checks it): it runs wherever the
trace is.
"""

from __future__ import annotations

import sys
from pathlib import Path

from stepview.insight.report import format_summary
from stepview.insight.run import RunInsight
from stepview.launch.exits import EXIT_OK, fail
from stepview.model.outside_text import terminal_text
from stepview.trace.format import TraceError
from stepview.trace.reader import load_trace
from stepview.trace.store import Trace


def summarize(trace: Trace, *, keep_steps: bool = False) -> RunInsight:
    """A :class:`RunInsight` fed every snapshot of the trace, in order (keeping every step's
    figures with ``keep_steps``, for a Chrome trace)."""
    insight = RunInsight(keep_steps=keep_steps)
    for snapshot in trace.snapshots:
        insight.observe(snapshot)
    return insight


def run_summary(path: Path) -> int:
    """Print the summary of the trace at ``path`` on stdout; returns the exit code."""
    try:
        trace = load_trace(path)
    except TraceError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot read trace {path}: {exc.strerror or exc}")
    text = format_summary(summarize(trace).summary())
    if trace.warning:
        text += f"\nnote: {trace.warning}"
    sys.stdout.write(terminal_text(text) + "\n")
    sys.stdout.flush()
    return EXIT_OK
