"""Small helpers shared by driver, engine and UI tests."""

from __future__ import annotations

import time
from collections.abc import Callable

from stepview.model.snapshot import StepSnapshot
from stepview.model.source import SnapshotSource


def wait_for(
    source: SnapshotSource, predicate: Callable[[StepSnapshot], bool], timeout: float = 30.0
) -> StepSnapshot:
    """Poll the source's latest snapshot until ``predicate`` holds; fail with the last one seen."""
    deadline = time.monotonic() + timeout
    snapshot = source.latest()
    while time.monotonic() < deadline:
        snapshot = source.latest()
        if predicate(snapshot):
            return snapshot
        time.sleep(0.005)
    raise AssertionError(f"condition not met within {timeout}s; last snapshot: {snapshot}")


def all_done(snapshot: StepSnapshot) -> bool:
    """Every request reached a final state and the engine is idle."""
    return not snapshot.active and snapshot.engine_state.value == "idle"
