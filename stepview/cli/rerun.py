"""The flags that send a recorded workload again: ``--rerun``, ``--rerun-speed`` and
``--export-workload`` (the ``rerun a recording`` group of ``stepview --help``).

Kept apart from :mod:`stepview.cli.args` (which adds this group to its parser and holds the
options) because the three belong together: the workload of a trace
(:mod:`stepview.trace.workload`), driven here on a new engine or written for another one.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from stepview.outputs.entry import HELP_WORKLOAD
from stepview.outputs.registry import add_output_flags
from stepview.trace.playback import check_speed


def _rerun_speed(text: str) -> float:
    """``--rerun-speed``: a finite number above 0 (argparse turns the error into exit 2)."""
    try:
        return check_speed(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text!r}") from None


def add_rerun_args(parser: argparse.ArgumentParser) -> None:
    """Add the ``rerun a recording`` group to ``parser``."""
    group = parser.add_argument_group(
        "rerun a recording",
        "The workload of a trace or flight recording (live or --attach): its prompts, "
        "sampling parameters and seeds, arrival times and output lengths, sent again to a "
        "new engine (the engine flags given; with no --model, the trace's), or written for "
        "another run to send.",
    )
    group.add_argument(
        "--rerun",
        type=Path,
        metavar="TRACE",
        help="send TRACE's requests again, as they arrived, to an engine stepview starts, "
        "recording the rerun (--record, else a file in stepview's data directory); then "
        "open the compare view of TRACE against the rerun at their first scheduling "
        "difference (--summary: print the compare table instead; --headless: a headless run "
        "as any other, --json and --results included). Requests that did not end on their "
        "own stop are held to their recorded length (ignore_eos, max_tokens)",
    )
    group.add_argument(
        "--rerun-speed",
        type=_rerun_speed,
        metavar="X",
        default=1.0,
        help="with --rerun: arrivals X times faster than recorded (default: %(default)s)",
    )
    add_output_flags(group, HELP_WORKLOAD)
