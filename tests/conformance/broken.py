"""``python -m tests.conformance.broken WHAT``: the situations with one of the plug-in's reads
broken on purpose, to show that the checks find it (``test_a_broken_read_is_found``).

``state``: vLLM's PREEMPTED status read as WAITING (a status map of the wrong release);
``blocks``: the KV cache groups read as empty (a renamed attribute of the block manager);
``scheduled``: the requests scheduled the step before forgotten (a request running but not
scheduled this step would keep its last step's tokens in every subscriber's view).
"""

from __future__ import annotations

import sys
from typing import Any

from vllm.v1.request import RequestStatus

from stepview.engine.plugin import capture
from stepview.engine.records.facts import CoreState
from tests.conformance.situations import run_all


def break_state() -> None:
    capture._STATE_OF[RequestStatus.PREEMPTED] = CoreState.WAITING


def break_blocks() -> None:
    real = capture.CoreCapture.capture

    def without_blocks(self: capture.CoreCapture, *args: Any, **kwargs: Any) -> Any:
        self._groups = [{}]
        return real(self, *args, **kwargs)

    capture.CoreCapture.capture = without_blocks  # type: ignore[method-assign]


def break_scheduled() -> None:
    capture.CoreCapture._last_scheduled = property(  # type: ignore[assignment]
        lambda self: [], lambda self, value: None
    )


if __name__ == "__main__":
    {"state": break_state, "blocks": break_blocks, "scheduled": break_scheduled}[sys.argv[1]]()
    sys.exit(0 if run_all(async_scheduling=False) else 1)
