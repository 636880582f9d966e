"""Every process a test's command ever had, and which of them are still alive after it.

A helper that came and went while the command ran counts as much as one still there: the
watch samples the process tree every few milliseconds while the command runs.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import psutil
import pytest

from tests.e2e.terminal import alive


class ProcessWatch:
    """Every descendant ``root`` has while the watch runs, sampled every few milliseconds."""

    def __init__(self, root: psutil.Process) -> None:
        self.root = root
        self._seen: dict[tuple[int, float], psutil.Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                children = self.root.children(recursive=True)
            except psutil.NoSuchProcess:
                return
            for child in children:
                try:
                    self._seen.setdefault((child.pid, child.create_time()), child)
                except psutil.NoSuchProcess:
                    continue
            self._stop.wait(0.01)

    def seen(self) -> list[psutil.Process]:
        return [self.root, *self._seen.values()]

    def close(self) -> list[psutil.Process]:
        self._stop.set()
        self._thread.join(5)
        return self.seen()


Watch = Callable[[psutil.Process], ProcessWatch]
"""The ``watch`` fixture: start watching a process tree."""


def left_behind(processes: list[psutil.Process], timeout: float = 2.0) -> list[psutil.Process]:
    """The ones still alive after ``timeout`` (Python's resource tracker, told by the end of
    stepview's process, takes a moment to clean up after a killed core and leave)."""
    psutil.wait_procs(alive(processes), timeout=timeout)  # returns as the last one exits
    return alive(processes)


@pytest.fixture
def watch() -> Iterator[Watch]:
    """``watch(root)`` -> a :class:`ProcessWatch`; whatever the test did, every process it
    saw is killed at the end (a stopped core, re-parented away, would stay for ever)."""
    watches: list[ProcessWatch] = []

    def start(root: psutil.Process) -> ProcessWatch:
        watches.append(ProcessWatch(root))
        return watches[-1]

    yield start
    for one in watches:
        for process in alive(one.close()):
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
