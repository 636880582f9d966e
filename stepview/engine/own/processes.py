"""The processes stepview's engine started, and ending them when the engine will not.

With the engine core in its own process (``VLLM_ENABLE_V1_MULTIPROCESSING=1``) vLLM 0.32
starts ``VLLM::EngineCore`` with multiprocessing (``CoreEngineProcManager`` in
``vllm/v1/engine/utils.py``), and on CPU the core starts a ``VLLM::Worker`` of its own. vLLM
stops them in ``MPClient.shutdown``: SIGTERM, a join of up to the given timeout, then
``kill_process_tree`` (SIGKILL to the core and its descendants; no process group). That
runs only when the thread that owns the engine calls it, and a core that stopped answering
(hung, or stopped with ``kill -STOP``) leaves that thread blocked for ever in ``step()``:
vLLM's client waits on its output queue with no timeout, and nothing puts anything there
when the core dies. At interpreter exit vLLM's finalizer would try again with a 5 s wait
(``VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS``); stepview leaves a stuck engine without running
exit handlers, so the stopped core stayed behind, holding its memory (a GPU's, on a GPU box).

:class:`EngineProcesses` therefore keeps its own list, from outside the engine and without
touching it (any thread may call :meth:`~EngineProcesses.end`, however stuck the engine's is):

* before the engine starts, the processes that are already this process's descendants
  (multiprocessing's resource tracker, started early by
  :func:`~stepview.engine.own.environment.start_process_helpers`): never the engine's, and
  the tracker cleans up after a killed core (its semaphores), so it is left alone;
* once the engine is up, every descendant that is new: taken then because a worker whose
  core dies is re-parented away and is no descendant any more;
* on the way out, the engine's processes still alive are the ones noted plus any new
  descendant since (an engine stuck in start-up was never noted as up), and their
  descendants. They get SIGTERM and SIGCONT (a stopped process acts on neither signal until
  it is continued), then, after :data:`KILL_GRACE_S`, SIGKILL.

Only descendants of this process are ever taken, so stepview never signals a process it did
not start; psutil refuses to signal a pid that was reused since (it compares start times).
psutil comes with vLLM (a dependency of it); without it there is no engine to end either.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

KILL_GRACE_S = 0.25
"""How long the engine's processes have to exit after SIGTERM before SIGKILL. Short: they are
only asked once the stop deadline (:data:`~stepview.model.source.STOP_TIMEOUT_S`, 4 s) is
over, and a quit must end within 5 s. A core that did not answer for 4 s seldom exits in
time anyway (measured here: a continued ``VLLM::EngineCore`` still ran 0.5 s after SIGTERM);
it has nothing to save (stepview wrote its files as it went), and the memory it held is freed
either way when it dies."""
KILL_WAIT_S = 2.0
"""After SIGKILL, how long to wait for the kernel to take a process down before calling it a
survivor (one in uninterruptible sleep, in a GPU driver, dies only when it leaves it).
Measured here: 0.04 s for a core and its worker on a quiet machine; beside a full test run
(load average 10-70 on 2 cores) a killed core and worker holding ~2 GB were still there
after 0.25 s, and the exit line said they "could not be killed". The wait ends as soon as
they are gone, so only a real survivor costs the whole of it, and a quit past a stopped core
(SIGTERM grace, then this) still ends within 5 s."""
_POLL_S = 0.01


@dataclass(frozen=True)
class EndedProcesses:
    """What :meth:`EngineProcesses.end` did, each process as ``"1234 (VLLM::EngineCore)"``."""

    killed: tuple[str, ...] = ()
    """Signalled and gone."""
    survived: tuple[str, ...] = ()
    """Still there after SIGKILL."""


class EngineProcesses:
    """The child processes of this process that an engine started (see the module docstring).

    :meth:`engine_starting` and :meth:`engine_up` run on the engine's thread, around its
    start; :meth:`alive` and :meth:`end` on any thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._before: frozenset[tuple[int, float]] | None = None
        self._known: list[Any] = []  # psutil.Process, noted once the engine is up

    def engine_starting(self) -> None:
        """Note what runs before the engine starts: none of it is the engine's."""
        before = frozenset(_identity(p) for p in _descendants())
        with self._lock:
            self._before = before

    def engine_up(self) -> None:
        """Note the engine's processes as they are once it is up."""
        new = self._new_descendants()
        with self._lock:
            self._known = new
        log.info("engine processes: %s", ", ".join(_describe(p) for p in new) or "none")

    def alive(self) -> list[Any]:
        """The engine's processes that have not exited (psutil ``Process`` objects)."""
        with self._lock:
            known = list(self._known)
        found: dict[tuple[int, float], Any] = {}
        for process in [*known, *self._new_descendants()]:
            if _gone(process):
                continue
            for one in [process, *_children_of(process)]:
                if not _gone(one):
                    found.setdefault(_identity(one), one)
        return list(found.values())

    def stopped(self) -> bool:
        """True when one of the engine's processes is stopped (``kill -STOP``, a debugger):
        it answers nothing until continued, so waiting for the engine to stop is pointless."""
        for process in self.alive():
            with contextlib.suppress(Exception):  # gone meanwhile: not stopped
                if process.status() in (_psutil().STATUS_STOPPED, _psutil().STATUS_TRACING_STOP):
                    return True
        return False

    def end(self, grace: float = KILL_GRACE_S) -> EndedProcesses:
        """End every engine process still alive: SIGTERM and SIGCONT, SIGKILL after ``grace``."""
        targets = self.alive()
        if not targets:
            return EndedProcesses()
        names = {_identity(p): _describe(p) for p in targets}
        began = time.monotonic()
        for process in targets:
            _signal(process, signal.SIGTERM)
            _signal(process, signal.SIGCONT)  # a stopped process acts on no signal but KILL
        stubborn = _wait_gone(targets, grace)
        for process in stubborn:
            _signal(process, signal.SIGKILL)
        survivors = {_identity(p) for p in _wait_gone(stubborn, KILL_WAIT_S)}
        ended = EndedProcesses(
            killed=tuple(n for key, n in names.items() if key not in survivors),
            survived=tuple(names[key] for key in survivors),
        )
        log.warning(
            "engine processes ended in %.2f s (%d needed SIGKILL): %s; survived: %s",
            time.monotonic() - began,
            len(stubborn),
            ", ".join(ended.killed),
            ", ".join(ended.survived) or "none",
        )
        return ended

    def _new_descendants(self) -> list[Any]:
        with self._lock:
            before = self._before
        if before is None:  # the engine never started: nothing is its
            return []
        return [p for p in _descendants() if _identity(p) not in before]


def _psutil() -> Any:
    try:
        import psutil
    except ImportError:
        return None
    return psutil


def _descendants() -> list[Any]:
    psutil = _psutil()
    if psutil is None:
        return []
    try:
        me = psutil.Process(os.getpid())
    except psutil.Error:
        return []
    found = _children_of(me)
    return [p for p in found if _identity(p) != (-1, 0.0)]


def _children_of(process: Any) -> list[Any]:
    psutil = _psutil()
    try:
        return list(process.children(recursive=True))
    except psutil.Error:
        return []


def _identity(process: Any) -> tuple[int, float]:
    """A process's pid and start time: a pid that is reused gets a new identity."""
    psutil = _psutil()
    try:
        return int(process.pid), float(process.create_time())
    except psutil.Error:
        return -1, 0.0


def _describe(process: Any) -> str:
    psutil = _psutil()
    try:
        return f"{process.pid} ({process.name()})"
    except psutil.Error:
        return str(process.pid)


def _gone(process: Any) -> bool:
    """Exited, a zombie included (a dead child waits for its parent to collect it; it holds
    no memory). Never waits on it: reaping a child here would take multiprocessing's."""
    psutil = _psutil()
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _signal(process: Any, signum: int) -> None:
    psutil = _psutil()
    with contextlib.suppress(psutil.Error):
        process.send_signal(signum)


def _wait_gone(processes: Iterable[Any], timeout: float) -> Sequence[Any]:
    """Poll until every one of ``processes`` is gone, at most ``timeout``; the ones left."""
    left = [p for p in processes if not _gone(p)]
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        left = [p for p in left if not _gone(p)]
    return left
