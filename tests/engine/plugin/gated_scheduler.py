"""A user's own scheduler class, for the tests: vLLM's, held back until N requests arrived.

It stands for a ``--scheduler-cls`` a user brings (stepview's plug-in must chain to it), and
makes the multiprocess engine core comparable with the in-process one: a core in its own
process starts stepping as soon as the first request arrives, so the others would join at
steps that depend on timing. Held back until all have arrived, both start from the same queue.
The engine core reads ``STEPVIEW_TEST_GATE`` when the scheduler is built (a core process
inherits the environment of the process that starts it).
"""

from __future__ import annotations

import os
from typing import Any

from vllm.v1.core.sched.scheduler import Scheduler

GATE_ENV = "STEPVIEW_TEST_GATE"


class GatedScheduler(Scheduler):
    """Reports no work until ``STEPVIEW_TEST_GATE`` requests are in; then plain vLLM."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = int(os.environ.get(GATE_ENV, "0"))

    def has_requests(self) -> bool:
        if self.gate:
            if len(self.requests) < self.gate:
                return False
            self.gate = 0
        return bool(super().has_requests())


class NotAScheduler:
    """What a wrong ``--scheduler-cls`` looks like: a class, but not a vLLM scheduler."""
