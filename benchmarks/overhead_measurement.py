"""What one run of one ``engine_overhead`` variant reports, and the bare variants' timed loop.

A child process (vLLM's bare loop, stepview's driver, either on vLLM or on the fake engine)
prints a :class:`Measurement` as its last line; the TUI's run stats become one too. Both the
runs on vLLM (:mod:`benchmarks.overhead_runs`) and those on the fake engine
(:mod:`benchmarks.fake_engine_runs`) make them, so it stands apart from either.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Measurement:
    """One variant, one run: what the child process (or the TUI's run stats) reported."""

    variant: str
    steps: int
    busy_s: float
    output_tokens: int
    stepping_s: float  # time inside step() (the engine's share of the busy span)
    cpu_s: float  # CPU time of the stepping thread over the busy span
    first_frame_s: float | None = None  # tui only: launch to the loading view on screen
    # driver variants: CPU time inside vLLM's own ``LLMEngine.step()`` over the busy span, so
    # ``cpu_s - vllm_cpu_s`` is stepview's own work per step, measured in the same process
    # (immune to the run-to-run drift that blurs the side-by-side ratios on a shared box).
    vllm_cpu_s: float | None = None

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.busy_s

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.busy_s


def bare_loop(
    name: str,
    unfinished: Callable[[], bool],
    step: Callable[[], T],
    samples: Callable[[T], Iterable[tuple[str, Any]]],
) -> Measurement:
    """The bare variants' loop: ``step()`` until nothing is unfinished, timed; ``samples``
    gives each step's samples that moved (request id, an output with ``index`` and
    ``token_ids``)."""
    # Latest length of every sample: for n=2 the final output carries only one of the two.
    lengths: dict[tuple[str, int], int] = {}
    steps = 0
    stepping = 0.0
    clock = time.perf_counter
    first, first_cpu = clock(), time.thread_time()
    end = first
    while unfinished():
        start = clock()
        outputs = step()
        end = clock()
        stepping += end - start
        steps += 1
        for request_id, completion in samples(outputs):
            lengths[(request_id, completion.index)] = len(completion.token_ids)
    cpu = time.thread_time() - first_cpu
    return Measurement(name, steps, end - first, sum(lengths.values()), stepping, cpu)
