"""Shutting vLLM's engine down on the way out of stepview, within the stop deadline.

stepview runs one engine per process and shuts it down only as the run ends: the process
exits right after. vLLM's shutdown is written for a process that goes on (tests that start
engine after engine): it frees the KV cache and the model and then runs full garbage
collections so the memory can be reused. Here those collections are most of the shutdown
(0.75 s of 0.87 s on this machine, in-process, measured with cProfile), and on a busy
2-core machine they stretched it past the 4 s stop deadline (``model.source.STOP_TIMEOUT_S``):
a run whose every request had finished then ended "the engine did not stop in time", exit 1.
So the shutdown runs with ``gc.collect`` made a no-op; the memory goes back to the system
when the process exits a moment later.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

CORE_EXIT_GRACE_S = 2.5
"""How long an engine core in its own process may take to exit after SIGTERM before it is
killed. vLLM's own default is 5 s, longer than the whole stop deadline (4 s): on a busy
machine a quit then ended "the engine did not stop in time", exit 1. The core has nothing to
save (stepview's files are written as it goes)."""


@contextlib.contextmanager
def without_collections() -> Iterator[None]:
    """``gc.collect()`` does nothing in the block (any thread); automatic collection is
    untouched. Only for a shutdown the process does not outlive (module docstring)."""
    collect = gc.collect

    def skipped(generation: int = 2) -> int:
        return 0

    gc.collect = skipped
    try:
        yield
    finally:
        gc.collect = collect


def shutdown_llm_engine(engine: Any) -> None:
    """Shut down vLLM's engine core (in-process: the executor and its worker too)."""
    core = getattr(engine, "engine_core", None)
    if core is not None:
        try:
            with without_collections():
                core.shutdown(timeout=CORE_EXIT_GRACE_S)
        except Exception:
            log.exception("stepview: vLLM engine shutdown failed")
