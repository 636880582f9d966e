"""Where a run's clock 0 sits on the wall clock: the run's epoch.

The driver's clock starts at 0 with the run, so a recording's times, and every request's
timeline, are offsets from it. What must place them on the wall clock (the OpenTelemetry
spans of ``--otlp-traces-endpoint``, live or sent later from a recording) reads the epoch:
:class:`RunEpoch` notes it at the first snapshot, and a recording's header keeps it as
:data:`EPOCH` so that a trace exported the next morning lands where the live run did.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from stepview.model.snapshot import RequestView, StepSnapshot

EPOCH = "epoch"
"""The trace header's field: the wall time, in seconds, of the run's clock 0."""


class RunEpoch:
    """A sink that notes, at the first snapshot, the wall time of driver clock 0.

    First among the sinks, so the others (the span sink, the recorder's header) read it."""

    def __init__(self) -> None:
        self.epoch: float | None = None
        self.error: str | None = None

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        if self.epoch is None:
            self.epoch = time.time() - snapshot.clock

    def close(self) -> None:
        pass

    def now(self) -> float:
        """The epoch, noting it from the process's clocks if no snapshot came yet."""
        if self.epoch is None:
            self.epoch = time.time()
        return self.epoch
