"""A fixed fleet of four servers for the README's picture of the fleet screen.

Two servers watched through ``/metrics`` (one overloaded: requests waiting for capacity, its KV
cache nearly full), one through the plug-in with two data-parallel ranks (its figures from its
published requests, :func:`stepview.testing.snapshots.mid_run`), and one that stopped
answering. Every figure is a constant, so the picture is the same on every run.
"""

from __future__ import annotations

from dataclasses import replace

from stepview.model.server_window import Latency, ServerWindow
from stepview.model.snapshot import (
    EngineCounters,
    EngineInfo,
    EngineState,
    RankStatus,
    RecentStep,
    StepSnapshot,
)
from stepview.model.source import SnapshotSource
from stepview.testing.snapshots import mid_run
from stepview.testing.sources import StaticSource

MODEL = "Qwen3-8B"
DOWN = EngineState.DISCONNECTED
WINDOW = 60.0


def _scraped(
    address: str,
    running: int,
    waiting: int,
    kv: float,
    ttft: tuple[float, float],
    tokens_per_step: int,
    *,
    state: EngineState = EngineState.RUNNING,
    preemptions: int = 0,
) -> StepSnapshot:
    """A ``/metrics`` watch's snapshot: the counters, a minute of scrapes, the window."""
    recent = tuple(
        RecentStep(i, float(i), 1.0, running, waiting, kv, tokens_per_step) for i in range(61)
    )
    return StepSnapshot(
        step=60,
        clock=60.0,
        engine_state=state,
        info=EngineInfo(model=f"{MODEL} @ {address}", attached=address, detailed_states=False),
        counters=EngineCounters(running=running, waiting=waiting, kv_cache_usage=kv),
        recent=recent,
        server=ServerWindow(
            address,
            WINDOW,
            WINDOW,
            (Latency("ttft", ttft[0], ttft[1], ttft[1], 120),),
            (("capacity", waiting),) if waiting else (),
            preemptions=preemptions,
        ),
    )


def fleet_members() -> list[tuple[str, SnapshotSource]]:
    """The four servers, in the order the command line would name them."""
    busy, calm = "http://gpu-a:8000", "http://gpu-b:8000"
    published, gone = "tcp://gpu-c:5570", "http://gpu-d:8000"
    base = mid_run()
    plugin = replace(
        base,
        info=replace(base.info, model=f"{MODEL} @ {published}", attached=published),
        ranks=(RankStatus(0, True, 3, 1, 0.41), RankStatus(1, True, 2, 2, 0.37)),
    )
    return [
        (busy, StaticSource(_scraped(busy, 64, 37, 0.97, (1.84, 6.2), 2900, preemptions=42))),
        (calm, StaticSource(_scraped(calm, 12, 0, 0.31, (0.09, 0.31), 640))),
        (published, StaticSource(plugin)),
        (
            gone,
            StaticSource(_scraped(gone, 0, 0, 0.0, (0.1, 0.2), 0, state=EngineState.DISCONNECTED)),
        ),
    ]
