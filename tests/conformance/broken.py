"""``python -m tests.conformance.broken WHAT...``: the situations with one of the plug-in's reads
broken on purpose at a time, to show that the checks find it (``test_each_broken_read_is_found``).

``state``: vLLM's PREEMPTED status read as WAITING (a status map of the wrong release);
``blocks``: the KV cache groups read as empty (a renamed attribute of the block manager);
``scheduled``: the requests scheduled the step before forgotten (a request running but not
scheduled this step would keep its last step's tokens in every subscriber's view);
``kv_loads``: vLLM 0.34's queue of KV loads and its in-flight cap not read (the plug-in as it
was for 0.33: a request held at the cap would be blamed on the KV cache, or on nothing).

Each break is undone before the next, so one process (one import of vLLM) runs them all; each
situation's line carries ``"broken": WHAT``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any
from unittest import mock

from vllm.v1.request import RequestStatus

from stepview.engine.plugin import capture, waiting_head
from stepview.engine.records.facts import CoreState
from tests.conformance.situations import run_all


def broken_state() -> contextlib.AbstractContextManager[Any]:
    return mock.patch.dict(capture._STATE_OF, {RequestStatus.PREEMPTED: CoreState.WAITING})


def broken_blocks() -> contextlib.AbstractContextManager[Any]:
    real = capture.CoreCapture.capture

    def without_blocks(self: capture.CoreCapture, *args: Any, **kwargs: Any) -> Any:
        self._groups = [{}]
        return real(self, *args, **kwargs)

    return mock.patch.object(capture.CoreCapture, "capture", without_blocks)


def broken_scheduled() -> contextlib.AbstractContextManager[Any]:
    forgotten = property(lambda self: [], lambda self, value: None)
    return mock.patch.object(capture.CoreCapture, "_last_scheduled", forgotten, create=True)


def broken_kv_loads() -> contextlib.AbstractContextManager[Any]:
    real = waiting_head.WaitingScan.fields

    def without_kv_loads(self: waiting_head.WaitingScan, *args: Any) -> dict[str, Any]:
        self.max_kv_loads = 0  # as if no cap were set: neither the queue nor the cap read
        return real(self, *args)

    return mock.patch.object(waiting_head.WaitingScan, "fields", without_kv_loads)


BREAKS: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "state": broken_state,
    "blocks": broken_blocks,
    "scheduled": broken_scheduled,
    "kv_loads": broken_kv_loads,
}


def main(names: list[str]) -> int:
    """Exit 0 only if the checks found every break (each run must fail)."""
    found = True
    for name in names:
        with BREAKS[name]():
            found &= not run_all(async_scheduling=False, tag={"broken": name})
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
