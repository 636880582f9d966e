"""The protocol between the driver and an engine: vLLM's, or a fake that behaves like it.

The driver (``stepview.engine.driver.loop``) knows nothing of vLLM. It talks to an :class:`Engine`:
``add_request`` / ``abort`` / ``step`` / ``has_unfinished`` / ``shutdown``, the same calls as
vLLM's ``LLMEngine``. ``step()`` returns a :class:`StepResult` shaped like vLLM's
CUMULATIVE outputs: every request that produced something this step, with *all* its tokens so
far. Those sequences may be live engine objects valid only until the next ``step()``: the
driver copies what it keeps, on its own thread, before stepping again.

``scheduled`` is what only the scheduler knows (queue membership, prefill progress,
preemptions), read from stepview's scheduler plug-in in either engine-core mode; it is ``None``
when the plug-in cannot tell (it switched itself off: a vLLM whose internals moved, or a
failure), and the driver then derives states from outputs alone.

A :class:`WatchedEngine` is one stepview does not drive: a running server it attached to
(``stepview --attach``). It steps by itself; ``has_unfinished()`` means "has a step to
report" and ``step()`` reports one. Its requests mostly come from other clients: a step
names those it sees for the first time (``arrived``), those that ended without a final
output stepview could read (``ended``), and the text learnt later for some of them
(``described``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple, Protocol, runtime_checkable

from stepview.model.chat import ChatMessage
from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import StepBudget, WaitReason
from stepview.model.snapshot import (
    EngineCounters,
    EngineInfo,
    EngineState,
    PositionLogprobs,
    RankStatus,
    RequestState,
)


class EngineRejected(Exception):
    """The engine refused a request; the message is the engine's own."""


class ChatPrompt(NamedTuple):
    """A chat request's messages after the model's chat template: the text the request shows
    and the exact tokens the engine runs (the text tokenized without adding special tokens,
    as vLLM's own chat does: the template already holds them)."""

    text: str
    token_ids: tuple[int, ...]


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
    wait_reason: WaitReason | None = None  # its own reason for getting nothing, if it has one
    scheduled_tokens: int = 0  # tokens it got this step
    kv_blocks: int = 0  # KV cache blocks it holds
    cached_prompt_tokens: int = 0  # prompt tokens the prefix cache served
    queue: int = 0  # which engine core's queue it is in (a watched server's ranks; else 0)


class ArrivedRequest(NamedTuple):
    """A request the engine holds that was not added through stepview (a watched server's).

    ``prompt`` is the text when known, else says what is known (``(12 prompt tokens)``).
    ``waited`` is how long it had been in the engine when it was first seen.
    """

    request_id: str
    prompt: str
    spec: SamplingSpec
    waited: float
    prompt_token_ids: tuple[int, ...] = ()
    trace_context: str = ""  # the W3C traceparent its client sent (RequestView's)
    client_id: str | None = None  # the id its server knows it by (its client's, or vLLM's)


class EndedRequest(NamedTuple):
    """A request that ended without a final output: it left a watched engine, or its server
    was lost. ``state`` is FINISHED (``reason`` is its finish reason), ABORTED or REJECTED
    (``reason`` is why)."""

    request_id: str
    state: RequestState
    reason: str


class DescribedRequest(NamedTuple):
    """Text a watched engine learnt after the fact for a request it reported as arrived.

    Its records carry token ids only; the server's API can decode them (``--api``). The
    text comes later than the ids, so it is a step's news of its own: ``prompt`` is the
    prompt's text (``None``: not in this news), ``completions`` the ``(sample index, text)``
    of samples that finish in the same step.
    """

    request_id: str
    prompt: str | None = None
    completions: tuple[tuple[int, str], ...] = ()


class VllmStamps(NamedTuple):
    """When vLLM says a request was first scheduled and produced its first token.

    vLLM's own timestamps (the engine core's ``SCHEDULED`` event and the time of the outputs
    that carried the first token: what its ``FinishedRequestStats`` splits queue, prefill and
    decode by), given as seconds before the end of the step that reports them, so that they
    need no shared clock.
    """

    scheduled_ago: float
    first_token_ago: float


_NO_STAMPS: Mapping[str, VllmStamps] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one ``step()`` did.

    ``arrived``, ``ended``, ``described``, ``interval`` and ``age`` come only from a
    :class:`WatchedEngine` (``described``: applied after this step's outputs, before its
    ``ended``; ``interval``: seconds between this step and its previous one in the watched
    engine, shown instead of the time ``step()`` took, which there is only the time to read
    it; ``age``: how long ago the step happened, as the watched engine's steps are read a
    little later, sometimes several at once).
    """

    outputs: tuple[OutputUpdate, ...]
    scheduled: Mapping[str, SchedulerEntry] | None
    counters: EngineCounters
    arrived: tuple[ArrivedRequest, ...] = ()
    ended: tuple[EndedRequest, ...] = ()
    described: tuple[DescribedRequest, ...] = ()
    interval: float | None = None
    age: float = 0.0
    budget: StepBudget | None = None  # how the step spent its token budget (the plug-in's)
    # Why the waiting requests without a reason of their own got nothing (the plug-in's):
    # one value per engine core's queue, see stepview.model.snapshot.reason_of.
    queue_reasons: tuple[WaitReason | None, ...] = ()
    # vLLM's times for the requests whose first token is in this step (stepview's own engine).
    stamps: Mapping[str, VllmStamps] = field(default_factory=lambda: _NO_STAMPS)


class Engine(Protocol):
    """The calls the driver makes, all from its one thread."""

    @property
    def info(self) -> EngineInfo: ...

    def add_request(
        self, request_id: str, prompt: str, spec: SamplingSpec, prompt_token_ids: Sequence[int] = ()
    ) -> str | None:
        """Queue a request in the engine, or raise :class:`EngineRejected`.

        With ``prompt_token_ids`` the engine runs those tokens and ``prompt`` only names them.
        Returns the W3C ``traceparent`` the engine gave the request (stepview's own engine,
        when vLLM exports traces: :attr:`RequestView.trace_context`), else ``None``.
        """

    def chat_prompt(self, messages: Sequence[ChatMessage]) -> ChatPrompt:
        """The model's chat template applied to ``messages`` (with the assistant's turn
        opened), or :class:`EngineRejected` when the model has none
        (:data:`~stepview.model.chat.NO_CHAT_TEMPLATE`; ``info.chat_template`` tells before)."""

    def abort(self, request_ids: list[str]) -> None:
        """Abort requests by the ids given to ``add_request``; unknown ids are ignored."""

    def has_unfinished(self) -> bool: ...

    def step(self) -> StepResult: ...

    def shutdown(self) -> None: ...


class CoreHold(Protocol):
    """Pause and single-step for an engine core that steps by itself, in its own process.

    With the core in the driver's process, not calling ``step()`` is pause enough. A core in
    its own process steps on its own while it has requests, so pausing the driver alone
    would only freeze the view. Each call returns how many steps the core had already made
    that the driver has not read yet (``step()`` reads one each; it must not be called
    beyond them while held, it would wait for ever).
    """

    def hold(self) -> int:
        """Stop the core between two steps, keeping every request and its KV cache."""

    def release(self) -> None:
        """Let the core step on."""

    def step_once(self) -> int:
        """While held: let the core make one step, and hold it again."""


class LinkState(NamedTuple):
    """How a watched engine is doing between steps, for the status bar.

    ``state`` is STARTING (never reached yet), RUNNING or IDLE (reached; requests in it or
    not) or DISCONNECTED; ``message`` says it in words (where it is, what is being done);
    ``behind`` is how many seconds the view is behind the server while records wait to be
    read (0 once it has caught up): the figure the message rounds, for a monitor to graph.
    ``unseen``: requests that arrived and ended within records that were lost (the view too
    far behind, the link down), so far: in no pane and no results file, only counted.
    """

    state: EngineState
    message: str = ""
    ranks: tuple[RankStatus, ...] = ()  # each engine core's own figures, when several
    behind: float = 0.0
    unseen: int = 0


@runtime_checkable
class WatchedEngine(Engine, Protocol):
    """An engine that runs by itself, watched rather than driven (``stepview --attach``).

    ``has_unfinished()`` is true when a step is ready to report, ``step()`` reports one;
    pausing only stops reading them (the engine goes on). ``info`` may change once the
    engine is reached.
    """

    def link(self) -> LinkState:
        """How the engine is doing now (cheap; read after every step and command)."""

    def has_read(self) -> bool:
        """True when what it has read holds a step to report, without reading more: a paced
        watch's next turn is due at once then, else at its pace."""


@runtime_checkable
class RecordWait(Protocol):
    """A watched engine that can wake an idle driver the moment it has a record to report.

    Without it an idle driver looks again every ``IDLE_WAIT_S`` (50 ms), and a record that
    arrives meanwhile waits for that look: half of it on average, all of it at worst, which
    is most of what an event of ``--events`` would otherwise take to reach its reader.
    """

    def wait_for_records(self, timeout: float, wake: int) -> None:
        """Block up to ``timeout`` seconds, until a record (or word of the link) arrives or
        the file descriptor ``wake`` is readable (a command for the driver); read nothing."""
