"""The output registry (:mod:`stepview.outputs`): what follows from its entries.

The command line's output flags, the lists its refusals name and the opening order all come
from :data:`~stepview.outputs.registry.OUTPUTS`; these check they do, and that reading the
entries stays cheap (the command line reads them all before anything runs).
"""

from __future__ import annotations

import subprocess
import sys

from stepview.cli.args import help_parser, parse_own_args
from stepview.cli.conflicts import one_server_flags
from stepview.outputs.registry import OUTPUTS, opening_order
from stepview.run.spec import FLEET, METRICS_PAGE, WATCH


def test_every_output_flag_is_a_flag_of_the_command_once() -> None:
    names = [flag.name for entry in OUTPUTS for flag in entry.flags]
    assert len(names) == len(set(names))
    assert len({entry.name for entry in OUTPUTS}) == len(OUTPUTS)
    known = [name for action in help_parser()._actions for name in action.option_strings]
    assert all(known.count(name) == 1 for name in names), names


def test_the_outputs_a_fleet_or_a_metrics_page_cannot_take_come_from_the_entries() -> None:
    """Named in the order the refusal has always named them: what records as the run goes,
    ``--stuck-after``, then what is written at the end."""
    own, _ = parse_own_args([])
    before = [
        "--record",
        "--results",
        "--metrics-port",
        "--flight-recorder",
        "--stuck-after",  # not an output: between what records and what is written at the end
        "--export-csv",
        "--export-chrome-trace",
    ]
    for lacking in (FLEET, METRICS_PAGE):
        named = [flag for flag, _ in one_server_flags(own, lacking)]
        assert named[:2] == ["--api", "--prompts"]
        assert [flag for flag in named if flag in before] == before
        for entry in OUTPUTS:
            refused = WATCH in entry.sources and lacking not in entry.sources
            assert (entry.flag.name in named) == refused, entry.name


def test_ports_and_folders_open_before_files() -> None:
    order = [entry.name for entry in opening_order() if entry.open is not None]
    assert order.index("flight") < order.index("results") < order.index("record")
    assert order.index("metrics") < order.index("results")


def test_reading_the_entries_imports_nothing_that_writes() -> None:
    """Only an opened output imports its writer: the parser is built before anything runs."""
    code = (
        "import sys, stepview.cli.args as a; a.help_parser().format_help(); "
        "print(sorted(m for m in sys.modules if m.startswith(('stepview.metrics', "
        "'stepview.trace.recorder', 'stepview.trace.flight', 'stepview.files.csv_export', "
        "'stepview.files.chrome_trace_file', 'stepview.insight', 'vllm', 'textual', 'zmq'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
