"""The live source: a :class:`Driver` whose engine is vLLM, built on the driver thread.

Everything slow (``import vllm``, parsing vLLM's flags, building the demo model, loading
weights, allocating the KV cache) happens inside the engine factory, on the driver thread, so
the TUI is already drawing the loading view while it runs. The factory also notes, in an
:class:`~stepview.engine.own.processes.EngineProcesses`, which processes the engine starts,
so the launcher can end them if the engine never stops.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from stepview.engine.driver.loop import Driver, PhaseCallback
from stepview.engine.own.engine_args import EngineArgsHolder, parse_engine_args
from stepview.engine.own.environment import start_process_helpers
from stepview.engine.own.processes import EngineProcesses
from stepview.insight.run import RunInsight
from stepview.model.engine_api import Engine
from stepview.model.recent import KEEP_FINISHED
from stepview.model.sink import SnapshotSink
from stepview.model.snapshot import EngineState


def live_driver(
    engine_argv: list[str],
    log_path: Path,
    *,
    holder: EngineArgsHolder,
    sinks: Sequence[SnapshotSink] = (),
    history_size: int = 2000,
    keep_finished: int = KEEP_FINISHED,
    admit_per_step: int = 0,
    insight: RunInsight | None = None,
    processes: EngineProcesses | None = None,
) -> Driver:
    """A driver that will build the vLLM engine from ``engine_argv`` when started.

    ``holder`` carries the parsed engine flags: pre-filled in headless mode (parsed up front),
    filled here on the engine thread in the TUI. ``processes`` is told when the engine starts
    and when it is up.
    """

    def factory(phase: PhaseCallback) -> Engine:
        from stepview.engine.own.environment import prepare_vllm_environment

        prepare_vllm_environment(log_path)
        parsed = holder.parsed
        if parsed is None:
            phase("importing vLLM")
            parsed = holder.parsed = parse_engine_args(engine_argv, say=phase)
        from stepview.engine.own.vllm_engine import VllmEngine

        if processes is not None:
            processes.engine_starting()
        engine = VllmEngine.create(
            parsed.engine_args,
            demo_model=parsed.demo_model,
            model_label=parsed.model_label,
            on_phase=phase,
        )
        if processes is not None:
            processes.engine_up()
        return engine

    start_process_helpers()
    driver = Driver(
        factory,
        sinks=sinks,
        history_size=history_size,
        keep_finished=keep_finished,
        admit_per_step=admit_per_step,
        insight=insight,
    )

    def hopeless() -> bool:
        # A quit need not wait for an engine that cannot answer it: a stopped core, or an
        # engine still being built (import vllm, the model's build and load), which no stop
        # interrupts and which has run nothing yet.
        stopped = processes is not None and processes.stopped()
        return stopped or driver.latest().engine_state is EngineState.STARTING

    driver.hopeless = hopeless
    return driver
