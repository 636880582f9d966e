"""Engines that misbehave on purpose, and the checks every reliability test ends with.

:class:`FaultyEngine` is the deterministic :class:`FakeEngine` with faults switched on by
the test: an ``add_request`` that raises for one prompt, a ``step()`` that raises, or a step
that blocks (as a hung GPU kernel would) until the test lets it go. It also keeps every
``add_request`` call, so a test can check that what the user typed reached the engine intact.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from stepview.engine.driver.loop import Driver
from stepview.model.engine_api import StepResult
from stepview.model.sampling import SamplingSpec
from stepview.model.sink import SnapshotSink
from stepview.testing.fake_engine import FakeEngine
from stepview.ui.app import StepviewApp
from tests.helpers import live_children

SIZE = (80, 24)


class InjectedFault(RuntimeError):
    """What a faulty engine raises; the tests look for its message on screen."""


class FaultyEngine(FakeEngine):
    """A :class:`FakeEngine` with faults the test switches on (see the module docstring)."""

    def __init__(
        self,
        *,
        fail_add_prompt: str | None = None,
        fail_step_at: int | None = None,
        block_step_at: int | None = None,
        max_num_seqs: int = 4,
        max_model_len: int = 512,
        max_logprobs: int = 20,
        step_delay: float = 0.0,
    ) -> None:
        super().__init__(
            max_num_seqs=max_num_seqs,
            max_model_len=max_model_len,
            max_logprobs=max_logprobs,
            step_delay=step_delay,
        )
        self.fail_add_prompt = fail_add_prompt
        self.fail_step_at = fail_step_at
        self.block_step_at = block_step_at
        self.released = threading.Event()
        """Set to let a blocked step return (tests set it in a finally)."""
        self.blocking = threading.Event()
        """Set while a step is blocked."""
        self.added: list[tuple[str, str, SamplingSpec]] = []
        self.steps = 0

    def add_request(
        self, request_id: str, prompt: str, spec: SamplingSpec, prompt_token_ids: Sequence[int] = ()
    ) -> None:
        self.added.append((request_id, prompt, spec))
        if prompt == self.fail_add_prompt:
            raise InjectedFault("tokenizer exploded on this prompt")
        super().add_request(request_id, prompt, spec, prompt_token_ids)

    def step(self) -> StepResult:
        self.steps += 1
        if self.steps == self.fail_step_at:
            raise InjectedFault("CUDA error: device-side assert triggered")
        if self.block_step_at is not None and self.steps >= self.block_step_at:
            self.blocking.set()
            self.released.wait(60)
        return super().step()


def driver_for(
    engine: FakeEngine, *, sinks: tuple[SnapshotSink, ...] = (), history_size: int = 256
) -> Driver:
    """A driver whose engine is ``engine`` (built already: start-up is instant)."""
    return Driver(lambda phase: engine, sinks=sinks, history_size=history_size)


def new_app(driver: Driver) -> StepviewApp:
    app = StepviewApp(driver, clock=None)
    app.animation_level = "none"
    return app


@dataclass(frozen=True)
class Running:
    """The threads and child processes alive when a test began.

    Children count against a test only if it started them: under xdist one worker also runs
    engine tests whose module-scoped engines (and their engine-core processes) outlive them.
    """

    threads: frozenset[threading.Thread]
    children: frozenset[int]


def running_now() -> Running:
    return Running(frozenset(threading.enumerate()), frozenset(p.pid for p in live_children()))


def leftovers(before: Running) -> list[str]:
    """Threads and child processes started since ``before`` that are still running.

    The event loop's own executor threads (``asyncio_N``, which ran the app's off-loop
    stop) are idle pool workers that end with the test's loop; anything else counts.
    """
    threads = [
        t.name
        for t in threading.enumerate()
        if t not in before.threads and t.is_alive() and not t.name.startswith("asyncio_")
    ]
    children = [f"pid {p.pid}" for p in live_children() if p.pid not in before.children]
    return threads + children
