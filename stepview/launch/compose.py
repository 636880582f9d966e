"""Where a run is put together: the one construction of a :class:`Driver`, over any engine,
with the run's outputs handed to it, and the start-up every watch of a server shares.

A mode (``tui``, ``headless``, ``attach``, ``attach_headless``, ``fleet``...) says what is
particular to it (which engine, which front end and the sinks that front end prints with)
and asks here for the rest, so that a driver gets the run's limits the same way in every mode
(``--history``, ``--keep-finished``, ``--admit-per-step``) and the run's outputs
(:class:`~stepview.launch.outputs.RunOutputs`, opened in one place) after the front end's
sinks, and a watch starts the same way whether it shows one server or a fleet: the terminal
claimed for a TUI, stepview's CPU priority lowered (``--nice``: a guest on the server's
machine), Python's collector set for a long-lived heap.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from stepview.launch.priority import lower_priority
from stepview.launch.terminal import claim_terminal
from stepview.model.sink import SnapshotSink
from stepview.run.spec import RunSpec

if TYPE_CHECKING:
    from stepview.engine.driver.loop import Driver, EngineFactory
    from stepview.engine.own.engine_args import EngineArgsHolder
    from stepview.engine.own.processes import EngineProcesses
    from stepview.insight.run import RunInsight
    from stepview.launch.outputs import RunOutputs

# Python's collector, for a process that holds a large, long-lived heap: the finished window
# (--keep-finished), the seen ids, the sketch. With the defaults (700, 10, 10), each tenth
# young collection scans all of it: in benchmarks/watch_memory.py at 30 000 requests, 46 full
# collections took 10.3 s of the watch's 35 s of CPU. A full one every hundredth leaves 4
# (1.2 s) and the same RSS: objects freed by their count go at once as before; only cyclic
# garbage waits longer. (vLLM's own engine core freezes its start-up heap for the same cost.)
WATCH_GC_THRESHOLDS = (700, 10, 100)


def run_driver(
    factory: EngineFactory,
    spec: RunSpec,
    *,
    outputs: RunOutputs | None = None,
    sinks: Sequence[SnapshotSink] = (),
    history: int | None = None,
    admit_per_step: int | None = None,
    read_only: str | None = None,
    insight: RunInsight | None = None,
    turn: AbstractContextManager[object] | None = None,
    watched: bool = True,
) -> Driver:
    """The driver of a run over the engine ``factory`` builds, with ``spec``'s limits
    (``history``, ``admit_per_step``: a mode's own, when it has one: 1 snapshot headless),
    feeding the front end's ``sinks``, then the run's ``outputs`` (told of the link to a
    ``watched`` server)."""
    from stepview.engine.driver.loop import Driver

    admit = spec.limits.admit_per_step if admit_per_step is None else admit_per_step
    every = [*sinks, *(outputs.sinks if outputs is not None else ())]
    driver = Driver(
        factory,
        sinks=every,
        history_size=spec.limits.history if history is None else history,
        keep_finished=spec.limits.keep_finished,
        admit_per_step=admit or 0,
        read_only=read_only,
        insight=insight,
        turn=turn,
    )
    if outputs is not None and watched:
        outputs.follow_link(lambda: driver.link)
    return driver


def own_driver(
    spec: RunSpec,
    log_path: Path,
    *,
    holder: EngineArgsHolder,
    processes: EngineProcesses,
    outputs: RunOutputs | None = None,
    sinks: Sequence[SnapshotSink] = (),
    history: int | None,
    admit_per_step: int,
    insight: RunInsight | None,
) -> Driver:
    """The driver of stepview's own vLLM (:mod:`stepview.engine.own.live`), built from
    ``spec``'s engine flags on the driver thread."""
    from stepview.engine.own.live import engine_hopeless, live_factory

    factory = live_factory(list(spec.engine.argv), log_path, holder=holder, processes=processes)
    driver = run_driver(
        factory,
        spec,
        outputs=outputs,
        sinks=sinks,
        history=history,
        admit_per_step=admit_per_step,
        insight=insight,
        watched=False,
    )
    driver.hopeless = lambda: engine_hopeless(driver, processes)
    return driver


def start_watch(spec: RunSpec, *, collect_less: bool = True) -> str | None:
    """What every watch of a server does before it starts a thread: claim the terminal for a
    TUI (why it cannot, if so), lower stepview's CPU priority, and (``collect_less``: a watch
    that keeps requests) set the collector for a long-lived heap."""
    if not spec.front.headless:
        problem = claim_terminal("")
        if problem is not None:
            return problem
    lower_priority(spec.watch.priority)
    if collect_less:
        gc.set_threshold(*WATCH_GC_THRESHOLDS)
    return None
