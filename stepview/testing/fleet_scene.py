"""Fixed fleets for pictures and tests of the fleet screen: four servers, or a crowd of 64.

:func:`fleet_members`, the README's picture: two servers watched through ``/metrics`` (one
overloaded: requests waiting for capacity, its KV cache nearly full), one through the plug-in
with two data-parallel ranks (its figures from its published requests,
:func:`stepview.testing.snapshots.mid_run`), and one that stopped answering.

:func:`crowd`, the fleet at the size the sort and filter are for: 64 servers with labels, each
figure spread so that every sort has one clear first server (:func:`crowd_figures`). Every
figure is a constant, so the picture and the tests are the same on every run.
"""

from __future__ import annotations

from dataclasses import replace

from stepview.model.address import watch_address
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
from stepview.model.targets import Member, Target
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


CROWD = 64
CROWD_PLUGIN = (20, 41)
"""The crowd's servers watched through the plug-in (two ranks each; mid_run's figures)."""
CROWD_DOWN = (33,)
"""The crowd's server that stopped answering (its figures all zero)."""


def crowd_address(index: int) -> str:
    """The crowd's server ``index``: ``http://gpu-07:8000``, or ``tcp://`` for a plug-in one."""
    if index in CROWD_PLUGIN:
        return f"tcp://gpu-{index:02d}:5570"
    return f"http://gpu-{index:02d}:8000"


def crowd_figures(index: int, count: int = CROWD) -> tuple[int, float, int, float]:
    """Server ``index``'s waiting, KV use, tokens per second and TTFT p99 (a ``/metrics``
    one's): each a different permutation of the servers (multiplied by a number prime to
    ``count``), so each sort puts a different server first (64: gpu-09 waits most, gpu-59
    has the fullest KV cache, gpu-29 makes the most tokens, gpu-37 the slowest first token)."""
    return (
        (index * 7) % count,
        ((index * 13) % count) / count,
        100 + ((index * 11) % count) * 10,
        0.1 + ((index * 19) % count) * 0.05,
    )


def crowd_labels(index: int) -> tuple[tuple[str, str], ...]:
    """``rack`` (16 servers each) and ``zone`` (every fourth server), as a listing gives."""
    return (("rack", f"r{index // 16}"), ("zone", f"z{index % 4}"))


def crowd_member(index: int, count: int = CROWD) -> Member:
    """Server ``index`` of a crowd of ``count``, with its labels and its fixed snapshot."""
    address = crowd_address(index)
    if index in CROWD_PLUGIN:
        base = mid_run()
        snapshot = replace(
            base,
            info=replace(base.info, model=f"{MODEL} @ {address}", attached=address),
            ranks=(RankStatus(0, True, 3, 1, 0.41), RankStatus(1, True, 2, 2, 0.37)),
        )
    elif index in CROWD_DOWN:
        snapshot = _scraped(address, 0, 0, 0.0, (0.0, 0.0), 0, state=DOWN)
    else:
        waiting, kv, tokens, p99 = crowd_figures(index, count)
        snapshot = _scraped(address, 8, waiting, kv, (p99 / 4, p99), tokens)
    target = Target(watch_address(address), crowd_labels(index), "crowd.json")
    return Member(target, StaticSource(snapshot))


def crowd(count: int = CROWD) -> list[Member]:
    """The ``count`` servers, in the order their listing names them: the last first (so that
    the listing's order is not the addresses')."""
    return [crowd_member(index, count) for index in reversed(range(count))]
