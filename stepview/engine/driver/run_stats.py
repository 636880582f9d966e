"""A run's totals: the driver's last log line, and the figures benchmarks compare with bare vLLM.

The benchmark runs the real ``stepview`` command in a terminal, so it cannot ask the driver
object for its :class:`RunStats`. It names a file in :data:`RUN_STATS_ENV` instead, and the
driver writes its totals there as JSON when its thread ends (:func:`hand_over`); the benchmark
reads them back with :func:`load`. Data in, data out: the log line is for people only.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)

RUN_STATS_ENV = "STEPVIEW_RUN_STATS"
"""Environment variable naming a file the driver writes its :class:`RunStats` to, as JSON,
when it stops (unset: nothing is written). For benchmarks that run stepview as a command."""


@dataclass(frozen=True, slots=True)
class RunStats:
    """A run's totals, exact once the driver thread has ended.

    ``busy_span`` is driver-clock seconds from the start of the first ``step()`` to the end of
    the last one, so throughput over it leaves out engine start-up and idle time (a TUI left
    open after the work is done) and compares equally with a bare ``step()`` loop.
    ``busy_cpu`` is the CPU time the driver thread used over that span: unlike the wall
    clock it does not grow when other processes take the CPU, but it also leaves out the time
    the thread waited for the GIL (which is how a UI thread slows the engine down).
    """

    steps: int
    requests_done: int
    tokens_generated: int
    stepping_time: float  # sum of step() wall times
    busy_span: float
    since_start: float
    busy_cpu: float = 0.0

    def summary(self) -> str:
        """The ``run summary: ...`` line the driver logs at shutdown."""
        return (
            f"run summary: {self.steps} steps, {self.requests_done} requests done, "
            f"{self.tokens_generated} tokens generated, {self.stepping_time:.3f} s in step(), "
            f"{self.since_start:.3f} s since start, {self.busy_span:.6f} s first to last step "
            f"({self.busy_cpu:.6f} s CPU)"
        )


def hand_over(stats: RunStats, environ: Mapping[str, str] = os.environ) -> None:
    """Write ``stats`` as JSON to the file :data:`RUN_STATS_ENV` names, if it names one.

    Runs as the driver stops: a file that cannot be written is logged, never raised.
    """
    target = environ.get(RUN_STATS_ENV)
    if not target:
        return
    try:
        Path(target).write_text(json.dumps(asdict(stats)) + "\n", encoding="utf-8")
    except OSError as exc:
        log.warning("cannot write the run stats to %s: %s", target, exc)


def load(path: Path) -> RunStats:
    """The :class:`RunStats` a driver handed over in ``path`` (raises if it is missing)."""
    return RunStats(**json.loads(path.read_text(encoding="utf-8")))
