"""What ``--headless`` prints on standard output, as an output: ``--json``.

The printing itself is the headless front end's (:class:`~stepview.launch.headless.
HeadlessPrinter`: vLLM's ``RequestOutput`` form, or with ``--json`` one object per finished
request, its timeline included); the entry holds the flag, its help and its rule.
"""

from __future__ import annotations

from typing import Any

from stepview.outputs.entry import (
    FINISHED,
    HELP_PRINTING,
    PRINTS,
    Flag,
    Output,
)
from stepview.run.spec import FLEET, METRICS_PAGE, OWN, RERUN, WATCH

JSON: Output[bool] = Output(
    name="json",
    flags=(
        Flag(
            "--json",
            HELP_PRINTING,
            {
                "action": "store_true",
                "help": "with --headless: print one JSON object per finished request instead",
            },
        ),
    ),
    kind=PRINTS,
    sources=frozenset({OWN, WATCH, METRICS_PAGE, FLEET, RERUN}),
    needs=frozenset({FINISHED}),
    spec=lambda values: True if values["json"] else None,
    headless_only=True,
)

ENTRIES: tuple[Output[Any], ...] = (JSON,)
"""This module's entries."""
