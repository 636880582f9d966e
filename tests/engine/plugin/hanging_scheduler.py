"""A user's scheduler class whose step hangs in native code, for the engine-core stack tests.

It stands for an engine core stuck inside a step: a kernel that never returns, a collective
waiting for a peer. From the ``STEPVIEW_TEST_HANG_AT``-th ``schedule()`` that has requests on,
it touches ``STEPVIEW_TEST_HANG_FILE`` (so the test knows) and sleeps in
:func:`hang_in_native_code` for ever (``time.sleep``: native code, the GIL free), inside the
engine core's step, under stepview's plug-in, which chains to it as to any ``--scheduler-cls``.
The engine core process reads both variables when the scheduler is built (it inherits the
environment of the process that starts it).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from vllm.v1.core.sched.scheduler import Scheduler

HANG_AT_ENV = "STEPVIEW_TEST_HANG_AT"
HANG_FILE_ENV = "STEPVIEW_TEST_HANG_FILE"
QUALNAME = "tests.engine.plugin.hanging_scheduler.HangingScheduler"


def hang_in_native_code() -> None:
    while True:  # a signal cuts one sleep short: the step stays hung
        time.sleep(3600)


class HangingScheduler(Scheduler):
    """vLLM's scheduler, until its ``STEPVIEW_TEST_HANG_AT``-th step with requests hangs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hang_at = int(os.environ.get(HANG_AT_ENV, "0"))
        self.scheduled = 0

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        if self.requests:
            self.scheduled += 1
            if self.hang_at and self.scheduled >= self.hang_at:
                Path(os.environ[HANG_FILE_ENV]).write_text(str(os.getpid()))
                hang_in_native_code()
        return super().schedule(*args, **kwargs)
