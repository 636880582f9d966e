"""Small helpers shared by driver, engine and UI tests."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil

from stepview.model.commands import Pause
from stepview.model.engine_api import SchedulerEntry, StepResult
from stepview.model.scheduling import WaitReason
from stepview.model.snapshot import RequestState, StepSnapshot
from stepview.model.source import SnapshotSource

ROOT = Path(__file__).resolve().parent.parent
"""The repository's root: what a child Python process needs on its path to import ``tests``."""
DATA = ROOT / "tests" / "data"
"""Recorded traces the tests replay."""
TINY_KV_BYTES = 5 * 128 * 1024
"""The smallest KV cache vLLM accepts for the tiny model (max_model_len 512, 128-token blocks):
5 blocks, one of them vLLM's null block, so 4 x 128 usable tokens, one full-length sequence;
long requests must take turns. 512 KiB (4 blocks) fails at start-up ("To serve at least one
request ...")."""
_QUEUED = (RequestState.WAITING, RequestState.PREEMPTED)


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
        time.sleep(0.005)  # polling: the source publishes by swapping an object, no event
    raise AssertionError(f"condition not met within {timeout}s; last snapshot: {snapshot}")


def went_round(driver: SnapshotSource, timeout: float = 30.0) -> StepSnapshot:
    """The snapshot a paused driver publishes once it has handled a command that changes
    nothing (pausing again): every step it was going to take before is in it, so a test can
    then assert that one did not happen, without waiting a fixed time for it."""
    before = driver.latest()
    driver.send(Pause())
    return wait_for(driver, lambda s: s is not before, timeout)


def all_done(snapshot: StepSnapshot) -> bool:
    """Every request reached a final state and the engine is idle."""
    return not snapshot.active and snapshot.engine_state.value == "idle"


def live_children() -> set[psutil.Process]:
    """This process's child processes that are still running.

    Children that have exited are reaped first (``multiprocessing.active_children`` joins
    them: vLLM does not always join its engine-core process at shutdown, which leaves a zombie
    until someone does). Python's resource tracker does not count: the first engine core
    spawned starts it, and it lives as long as the interpreter.
    """
    multiprocessing.active_children()
    alive = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            if "multiprocessing.resource_tracker" in " ".join(child.cmdline()):
                continue
        except psutil.NoSuchProcess:  # gone meanwhile (ZombieProcess is one too)
            continue
        alive.add(child)
    return alive


class Entries:
    """An engine's scheduler entries as the driver's ledger keeps them, for tests that read
    ``StepResult`` directly: each step says what changed, on top of what it said before.

    A request's reason is its own, or, while it waits without one, what its queue shares
    (``StepResult.queue_reasons``), as :func:`stepview.model.snapshot.reason_of` reads it.
    """

    def __init__(self) -> None:
        self.entries: dict[str, SchedulerEntry] = {}
        self.queue_reasons: tuple[WaitReason | None, ...] = ()

    def apply(self, result: StepResult) -> Entries:
        assert result.scheduled is not None, "no scheduler entries: is the plug-in on?"
        self.entries.update(result.scheduled)
        self.queue_reasons = result.queue_reasons
        for output in result.outputs:
            if output.finished:
                self.entries.pop(output.request_id, None)
        return self

    def forget(self, request_ids: Iterable[str]) -> None:
        for request_id in request_ids:
            self.entries.pop(request_id, None)

    def reason(self, request_id: str) -> WaitReason | None:
        entry = self.entries[request_id]
        if entry.wait_reason is not None or entry.state not in _QUEUED:
            return entry.wait_reason
        queue = entry.queue
        return self.queue_reasons[queue] if queue < len(self.queue_reasons) else None
