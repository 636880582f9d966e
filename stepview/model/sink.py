"""What the driver hands every snapshot to, besides the UI: the results file, the trace, a printer.

The protocol lives with the plain data, not with the driver, because its implementations live
in several packages (the trace recorder in ``trace/``, the results file and the headless printer
in ``launch/`` and ``engine/``) and none of them should import the driver to name it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from stepview.model.snapshot import RequestView, StepSnapshot


class SnapshotSink(Protocol):
    """Something that sees every snapshot on the driver thread (recorder, results file, printer).

    It must be cheap: it runs between two engine steps. A sink never stops the engine: when its
    file fails (disk full, file removed) it stops writing and says why in :attr:`error`.
    """

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        """``finished`` holds the requests that reached a final state since the last call."""

    def close(self) -> None:
        """The driver is stopping; flush and release files."""

    @property
    def error(self) -> str | None:
        """Why the sink stopped writing mid-run, to tell the user; None while all is well."""
