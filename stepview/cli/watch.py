"""The flags of a stepview left running beside a server: bounds, rotation, flight recorder,
metrics (the ``leaving it running`` group of ``stepview --help``).

Kept apart from :mod:`stepview.cli.args` (which adds this group to its parser) because they
share their value types: sizes (``100M``), durations (``10m``) and ports, each refused with a
message naming the flag, as argparse does for a ``type=``.
"""

from __future__ import annotations

import argparse

from stepview.model.recent import KEEP_FINISHED
from stepview.outputs.entry import HELP_LONG_RUN, HELP_SERVED
from stepview.outputs.registry import add_output_flags
from stepview.run.flag_values import duration


def add_watch_args(parser: argparse.ArgumentParser) -> None:
    """The ``leaving it running`` group."""
    group = parser.add_argument_group(
        "leaving it running",
        "For a watch that runs for weeks (nohup, a systemd unit): memory stays within the "
        "bounds below, whatever the run's length.",
    )
    group.add_argument(
        "--keep-finished",
        type=int,
        metavar="N",
        default=KEEP_FINISHED,
        help="finished requests kept in memory for the panes and the latency panel, 1 or "
        "more (default: %(default)s); every one is in the results file as it finishes",
    )
    add_output_flags(group, HELP_LONG_RUN)
    group.add_argument(
        "--stuck-after",
        type=duration,
        metavar="SECONDS",
        help="raise a stuck alert when a request has waited longer than this (e.g. 300 or "
        "5m; default: never), as when a server's /health stays green while one waits",
    )
    add_output_flags(group, HELP_SERVED)
