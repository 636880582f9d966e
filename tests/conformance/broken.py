"""``python -m tests.conformance.broken WHAT...``: the situations with one of the plug-in's reads
broken on purpose at a time, to show that the checks find it (``test_each_broken_read_is_found``).

``state``: vLLM's PREEMPTED status read as WAITING (a status map of the wrong release);
``blocks``: the KV cache groups read as empty (a renamed attribute of the block manager);
``scheduled``: the requests scheduled the step before forgotten (a request running but not
scheduled this step would keep its last step's tokens in every subscriber's view);
``kv_queue``: vLLM 0.34's queue of KV loads (``async_kv_waiting``) left out of the scan of the
waiting queues (a request behind a load the cache cannot hold would read as the scan's stop);
``kv_cap``: its in-flight KV-load cap not read (a request held there would be blamed on the KV
cache).

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

from stepview.engine.plugin import capture, naming, statuses, waiting_head
from stepview.engine.records.request_states import CoreState
from tests.conformance.situations import run_all


def broken_state() -> contextlib.AbstractContextManager[Any]:
    codes = statuses.VLLM.code_of
    return mock.patch.dict(codes, {RequestStatus.PREEMPTED: CoreState.WAITING})


def broken_blocks() -> contextlib.AbstractContextManager[Any]:
    real = capture.CoreCapture.capture

    def without_blocks(self: capture.CoreCapture, *args: Any, **kwargs: Any) -> Any:
        self._groups = [{}]
        return real(self, *args, **kwargs)

    return mock.patch.object(capture.CoreCapture, "capture", without_blocks)


def broken_scheduled() -> contextlib.AbstractContextManager[Any]:
    forgotten = property(lambda self: [], lambda self, value: None)
    return mock.patch.object(naming.Naming, "_last_scheduled", forgotten, create=True)


def broken_kv_queue() -> contextlib.AbstractContextManager[Any]:
    real = waiting_head.WaitingScan.scan_head

    def without_kv_queue(self: waiting_head.WaitingScan, *args: Any) -> str | None:
        scheduler, deferred, _loads, capped = args
        return real(self, scheduler, deferred, None, capped)

    return mock.patch.object(waiting_head.WaitingScan, "scan_head", without_kv_queue)


def broken_kv_cap() -> contextlib.AbstractContextManager[Any]:
    return mock.patch.object(waiting_head.WaitingScan, "_at_load_cap", lambda self, s: [])


BREAKS: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "state": broken_state,
    "blocks": broken_blocks,
    "scheduled": broken_scheduled,
    "kv_queue": broken_kv_queue,
    "kv_cap": broken_kv_cap,
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
