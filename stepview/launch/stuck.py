"""The way out past an engine that did not stop by the deadline, for the TUI and headless.

The engine stops between two steps, and vLLM's own shutdown ends its engine-core process; an
engine that stopped answering (a hung kernel; an engine core in its own process that hangs,
or is stopped with ``kill -STOP``) does neither: the driver thread stays in ``step()`` for
ever. Once the stop deadline (:data:`~stepview.model.source.STOP_TIMEOUT_S`) is over,
:func:`give_up_on_engine` ends the run without it (the driver's books: every request in the
results file, the rest ``unfinished``), then ends the engine's processes (SIGTERM, SIGKILL
after a short grace; see :mod:`stepview.engine.own.processes`), so that nothing is left
holding the machine's memory (a GPU's), and says so in the exit line. The process then
leaves without exit handlers (:func:`~stepview.launch.exits.exit_now`): they would wait on the
engine thread's objects. An engine in stepview's own process goes with the process.

A quit while the engine is still being built (``import vllm``, the built-in model's build, the
weights' load: seconds, and nothing can interrupt them) is no stuck engine: the stop does not
wait for it, and the exit line says only that the run stopped in start-up
(:data:`IN_START_UP`); requests sent meanwhile are recorded ``unfinished``.

After a timely stop, :func:`end_leftovers` checks that vLLM's shutdown left no process behind.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from stepview.model.snapshot import EngineState

if TYPE_CHECKING:
    from stepview.engine.driver.loop import Driver
    from stepview.engine.own.processes import EndedProcesses, EngineProcesses

log = logging.getLogger(__name__)

NOT_IN_TIME = "the engine did not stop in time"
IN_START_UP = "stopped during the engine's start-up"
"""The exit line of a quit while the engine was being built: not a fault, nothing ran."""


def in_start_up(driver: Driver) -> bool:
    """Whether the engine never came up: a quit then is no stuck engine, only an early one."""
    return driver.latest().engine_state is EngineState.STARTING


def give_up_on_engine(driver: Driver, processes: EngineProcesses | None) -> str:
    """End the run and the engine's processes without the stuck engine; the exit line."""
    starting = in_start_up(driver)
    if not driver.abandon():
        log.warning("the driver thread kept its books: the results may miss requests in flight")
    ended = None if processes is None else processes.end()
    if starting:
        if ended is not None and (ended.killed or ended.survived):
            log.warning("ended the engine's processes in its start-up: %s", ended)
        return IN_START_UP
    if ended is None:
        return f"{NOT_IN_TIME}; exiting anyway"
    return stuck_line(ended)


def end_leftovers(processes: EngineProcesses | None) -> None:
    """After an engine that did stop: end any of its processes still alive (logged only:
    the run itself went well)."""
    if processes is not None:
        ended = processes.end()
        if ended.killed or ended.survived:
            log.warning("the engine's shutdown left processes behind: %s", ended)


def stuck_line(ended: EndedProcesses) -> str:
    """``the engine did not stop in time; its process 1234 (VLLM::EngineCore) was killed``."""
    parts = [NOT_IN_TIME]
    if ended.killed:
        parts.append(f"its {_processes(ended.killed)} {_was(ended.killed)} killed")
    if ended.survived:
        parts.append(f"its {_processes(ended.survived)} could not be killed")
    if len(parts) == 1:
        parts.append("exiting anyway")
    return "; ".join(parts)


def _processes(names: tuple[str, ...]) -> str:
    return ("process " if len(names) == 1 else "processes ") + ", ".join(names)


def _was(names: tuple[str, ...]) -> str:
    return "was" if len(names) == 1 else "were"
