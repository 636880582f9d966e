"""The protocol between the driver and an engine: vLLM's, or a fake that behaves like it.

The driver (``stepview.engine.driver``) knows nothing of vLLM. It talks to an :class:`Engine`:
``add_request`` / ``abort`` / ``step`` / ``has_unfinished`` / ``shutdown``, the same calls as
vLLM's ``LLMEngine``. ``step()`` returns a :class:`StepResult` shaped like vLLM's
CUMULATIVE outputs: every request that produced something this step, with *all* its tokens so
far. Those sequences may be live engine objects valid only until the next ``step()``: the
driver copies what it keeps, on its own thread, before stepping again.

``scheduled`` is what only the scheduler knows (queue membership, prefill progress,
preemptions); it is ``None`` when the engine cannot tell (vLLM in multiprocess mode, or a
vLLM version whose internals moved), and the driver then derives states from outputs alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineCounters, EngineInfo, PositionLogprobs, RequestState


class EngineRejected(Exception):
    """The engine refused a request; the message is the engine's own."""


class CompletionUpdate(NamedTuple):
    """One sample of a request after this step (cumulative, like vLLM's CompletionOutput).

    This and the other per-request records below are named tuples: cheap to build, and
    built for every request that moved on every step.
    """

    index: int  # type: ignore[assignment]  # the field shadows tuple.index, on purpose
    text: str
    token_ids: Sequence[int]
    cumulative_logprob: float | None
    logprobs: Sequence[PositionLogprobs] | None
    finish_reason: str | None
    stop_reason: str | int | None


class OutputUpdate(NamedTuple):
    """One vLLM ``RequestOutput`` (for n > 1, one per child sample that moved)."""

    request_id: str
    prompt_token_ids: Sequence[int] | None
    prompt_logprobs: Sequence[PositionLogprobs | None] | None
    completions: tuple[CompletionUpdate, ...]
    finished: bool


class SchedulerEntry(NamedTuple):
    """The scheduler's view of one request (children of an n > 1 request merged)."""

    state: RequestState  # WAITING, PREEMPTED, PREFILLING or DECODING
    prompt_tokens: int
    computed_prompt_tokens: int
    num_preemptions: int


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one ``step()`` did."""

    outputs: tuple[OutputUpdate, ...]
    scheduled: Mapping[str, SchedulerEntry] | None
    counters: EngineCounters


class Engine(Protocol):
    """The calls the driver makes, all from its one thread."""

    @property
    def info(self) -> EngineInfo: ...

    def add_request(self, request_id: str, prompt: str, spec: SamplingSpec) -> None:
        """Queue a request in the engine, or raise :class:`EngineRejected`."""

    def abort(self, request_ids: list[str]) -> None:
        """Abort requests by the ids given to ``add_request``; unknown ids are ignored."""

    def has_unfinished(self) -> bool: ...

    def step(self) -> StepResult: ...

    def shutdown(self) -> None: ...
