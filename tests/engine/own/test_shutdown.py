"""The engine's shutdown runs without vLLM's full collections, and gives ``gc.collect`` back."""

from __future__ import annotations

import gc
from typing import Any

from stepview.engine.own.shutdown import CORE_EXIT_GRACE_S, shutdown_llm_engine, without_collections


class Core:
    """vLLM's engine core as far as the shutdown goes: it collects, as vLLM's does."""

    def __init__(self) -> None:
        self.collected: list[int] = []
        self.timeout: float | None = None

    def shutdown(self, timeout: float) -> None:
        self.timeout = timeout
        self.collected.append(gc.collect())


class Engine:
    def __init__(self) -> None:
        self.engine_core = Core()


def test_collections_are_skipped_in_the_block_and_only_there() -> None:
    collect = gc.collect
    garbage: list[Any] = []
    garbage.append(garbage)  # a cycle only a collection frees
    del garbage
    with without_collections():
        assert gc.collect() == 0
    assert gc.collect is collect
    assert gc.collect() >= 1  # the cycle: collections work again


def test_the_engine_core_is_shut_down_with_the_grace_and_no_collection() -> None:
    engine = Engine()
    cycle: list[Any] = []
    cycle.append(cycle)
    del cycle
    shutdown_llm_engine(engine)
    assert engine.engine_core.timeout == CORE_EXIT_GRACE_S
    assert engine.engine_core.collected == [0]
