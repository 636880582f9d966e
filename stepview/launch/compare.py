"""``stepview --replay A --compare B [--summary]``: two recorded runs compared.

Checks both files before anything else (exit 2, one line: not a trace, the same trace twice),
then prints the comparison (``--summary``: no UI, no vLLM, no Textual) or opens the compare
TUI. Nothing here imports vLLM.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from stepview.insight.compare import compare_runs
from stepview.insight.compare_report import format_comparison
from stepview.launch.exits import EXIT_FAILED, EXIT_OK, fail
from stepview.model.outside_text import terminal_text
from stepview.trace.format import TraceError
from stepview.trace.reader import load_trace
from stepview.trace.store import Trace


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def load_pair(a: Path, b: Path) -> tuple[Trace, Trace] | str:
    """Both traces, or the one-line reason they cannot be compared."""
    if _same_file(a, b):
        return f"--compare {b} is the trace given to --replay: compare two different runs"
    traces = []
    for path in (a, b):
        try:
            traces.append(load_trace(path))
        except TraceError as exc:
            return str(exc)
        except OSError as exc:
            return f"cannot read trace {path}: {exc.strerror or exc}"
    return traces[0], traces[1]


def run_compare(a: Path, b: Path, *, summary: bool, aligned: bool = False) -> int:
    """Compare the traces at ``a`` and ``b``: print (``summary``) or open the TUI;
    ``aligned``: B's steps counted from A's first scheduling step (a rerun's, see
    :mod:`stepview.insight.compare`)."""
    pair = load_pair(a, b)
    if isinstance(pair, str):
        return fail(pair)
    trace_a, trace_b = pair
    if not summary:
        return _run_tui(trace_a, trace_b, aligned)
    comparison = compare_runs(trace_a.snapshots, trace_b.snapshots, aligned=aligned)
    text = format_comparison(comparison, str(a), str(b))
    for name, trace in (("A", trace_a), ("B", trace_b)):
        if trace.warning:
            text += f"\nnote ({name}): {trace.warning}"
    sys.stdout.write(terminal_text(text) + "\n")
    sys.stdout.flush()
    return EXIT_OK


def _run_tui(trace_a: Trace, trace_b: Trace, aligned: bool) -> int:
    from stepview.launch.terminal import claim_terminal
    from stepview.ui.compare.app import CompareApp

    problem = claim_terminal("")
    if problem is not None:
        return fail(problem)
    app = CompareApp(trace_a, trace_b, aligned=aligned)
    app.run()
    return EXIT_FAILED if app.return_code else EXIT_OK
