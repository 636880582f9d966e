"""The live source's engine: vLLM, built on the driver thread of a :class:`Driver`.

Everything slow (``import vllm``, parsing vLLM's flags, building the demo model, loading
weights, allocating the KV cache) happens inside the engine factory, on the driver thread, so
the TUI is already drawing the loading view while it runs. The factory also notes, in an
:class:`~stepview.engine.own.processes.EngineProcesses`, which processes the engine starts,
so the launcher can end them if the engine never stops.
"""

from __future__ import annotations

from pathlib import Path

from stepview.engine.driver.loop import Driver, EngineFactory, PhaseCallback
from stepview.engine.own.engine_args import EngineArgsHolder, parse_engine_args
from stepview.engine.own.environment import start_process_helpers
from stepview.engine.own.processes import EngineProcesses
from stepview.model.engine_api import Engine
from stepview.model.snapshot import EngineState


def live_factory(
    engine_argv: list[str],
    log_path: Path,
    *,
    holder: EngineArgsHolder,
    processes: EngineProcesses | None = None,
) -> EngineFactory:
    """The factory of the vLLM engine built from ``engine_argv`` when a driver starts.

    ``holder`` carries the parsed engine flags: pre-filled in headless mode (parsed up front),
    filled here on the engine thread in the TUI. ``processes`` is told when the engine starts
    and when it is up. The process helpers the engine needs start now, before any driver.
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
    return factory


def engine_hopeless(driver: Driver, processes: EngineProcesses | None) -> bool:
    """Whether a quit need not wait for the engine: a stopped core, or an engine still being
    built (import vllm, the model's build and load), which no stop interrupts and which has
    run nothing yet (the driver's ``hopeless``)."""
    stopped = processes is not None and processes.stopped()
    return stopped or driver.latest().engine_state is EngineState.STARTING
