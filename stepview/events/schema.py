"""The events a program reads from ``--events``: their kinds and fields, version 1, as plain dicts.

An event is a JSON object: what changed for one request (``arrived``, ``waiting``,
``scheduled``, ``first_token``, ``preempted``, ``resumed``, ``finished``, ``aborted``), for the
engine (``step``, at most a few per second), for a server of a fleet (``server``), or for one
reader of the stream (``dropped``). Every event says ``v`` (the schema's version, 1), its
``event`` kind, and when: the engine ``step`` it came from, ``clock`` (the run's seconds since
stepview started it, the clock of the results file's timings), ``time`` (stepview's wall clock,
Unix seconds, when it made the event) and ``engine_time`` (the wall clock of the engine step that
caused it: for a watched server, when the server made that step, as its records date it; ``None``
before any step). A watched server's events name it (``server``: its address).

Dicts, not classes: they are made on the driver thread for every change (a dict literal is the
cheapest object to build), go out as JSON unchanged, and a reader in any language sees the same
names. The builders below are the one place each kind's fields are named; the JSON Schema
shipped beside this module (``events.schema.json``, :func:`schema_path`) says the same for
programs, and a test holds every event of a real run to it. No I/O here.

Adding a field is compatible (readers ignore what they do not know); renaming or removing one,
or changing its meaning, makes version 2.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Final

from stepview.model.latency import request_latency
from stepview.model.scheduling import StepBudget, WaitReason
from stepview.model.snapshot import RequestView

VERSION: Final = 1

ARRIVED: Final = "arrived"
WAITING: Final = "waiting"
SCHEDULED: Final = "scheduled"
FIRST_TOKEN: Final = "first_token"
PREEMPTED: Final = "preempted"
RESUMED: Final = "resumed"
FINISHED: Final = "finished"
ABORTED: Final = "aborted"
STEP: Final = "step"
SERVER: Final = "server"
DROPPED: Final = "dropped"
KINDS: Final = (
    ARRIVED,
    WAITING,
    SCHEDULED,
    FIRST_TOKEN,
    PREEMPTED,
    RESUMED,
    FINISHED,
    ABORTED,
    STEP,
    SERVER,
    DROPPED,
)

# What a ``server`` event says of one server of a fleet.
UP: Final = "up"  # answering, its view current
DOWN: Final = "down"  # not answering (stepview keeps trying)
BEHIND: Final = "behind"  # answering, but the view is more than BEHIND_S behind it
JOINED: Final = "joined"  # a discovery listed it: stepview watches it from now on
LEFT: Final = "left"  # no longer listed: no longer watched
SERVER_STATES: Final = (UP, DOWN, BEHIND, JOINED, LEFT)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


class When:
    """The time fields every event of one snapshot shares (made once per snapshot)."""

    __slots__ = ("fields",)

    def __init__(
        self, step: int, clock: float, time: float, engine_time: float | None, server: str | None
    ) -> None:
        fields: dict[str, Any] = {
            "v": VERSION,
            "step": step,
            "clock": round(clock, 6),
            "time": round(time, 6),
            "engine_time": _round(engine_time),
        }
        if server is not None:
            fields["server"] = server
        self.fields = fields

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        """An event of ``kind`` at this time, with ``fields``."""
        return {"event": kind, **self.fields, **fields}


def arrived(when: When, view: RequestView, client_id: str | None, prompt: bool) -> dict[str, Any]:
    """A request stepview learnt of: sent through stepview, or another client's (``client_id``:
    the id that client's server knows it by). The prompt's text only when asked for."""
    event = when.event(
        ARRIVED,
        id=view.request_id,
        client_id=client_id,
        prompt_tokens=view.prompt_tokens,
        params=view.spec.to_dict(),
        parent=None if view.lineage is None else view.lineage.parent,
        arrival=round(view.timings.arrival, 6),
    )
    if prompt:
        event["prompt"] = view.prompt
    return event


def waiting(when: When, view: RequestView, reason: WaitReason) -> dict[str, Any]:
    """A waiting request's reason changed (or it began to wait): vLLM's rule by its code, the
    sentence stepview shows for it, and the request it waits behind (``behind``)."""
    return when.event(
        WAITING,
        id=view.request_id,
        state=view.state.value,
        code=reason.code,
        sentence=reason.text,
        behind=reason.blocker,
        queue=view.queue,
    )


def scheduled(when: When, view: RequestView, tokens: int) -> dict[str, Any]:
    """A chunk of the request's prompt was computed in the step: ``tokens`` of it (cached ones
    included), ``computed`` so far of ``of``."""
    return when.event(
        SCHEDULED,
        id=view.request_id,
        tokens=tokens,
        computed=view.computed_prompt_tokens,
        of=view.prompt_tokens,
        cached=view.cached_prompt_tokens,
    )


def first_token(when: When, view: RequestView) -> dict[str, Any]:
    """The request's first output token: its time to first token (arrival to first token)."""
    return when.event(
        FIRST_TOKEN,
        id=view.request_id,
        ttft=_round(request_latency(view).ttft),
        first_token=_round(view.timings.first_token),
    )


def preempted(when: When, view: RequestView, tokens_lost: int) -> dict[str, Any]:
    """The request lost its KV cache: ``tokens_lost`` will be computed again. vLLM frees
    them for the running requests that need blocks; ``why`` is stepview's sentence (vLLM does
    not say which request got them)."""
    reason = view.wait_reason
    return when.event(
        PREEMPTED,
        id=view.request_id,
        tokens_lost=tokens_lost,
        preemptions=view.num_preemptions,
        why=None if reason is None else reason.text,
    )


def resumed(when: When, view: RequestView) -> dict[str, Any]:
    """A preempted request was scheduled again."""
    return when.event(RESUMED, id=view.request_id, preemptions=view.num_preemptions)


def _finish_reasons(view: RequestView) -> list[str | None]:
    return [c.finish_reason for c in view.completions]


def finished(when: When, view: RequestView) -> dict[str, Any]:
    """The request finished: why (each sample's finish reason), its usage and its latencies
    (the results file's figures: vLLM's own times where the engine gives them)."""
    latency = request_latency(view)
    return when.event(
        FINISHED,
        id=view.request_id,
        reason=_finish_reasons(view),
        usage={
            "prompt_tokens": view.prompt_tokens,
            "completion_tokens": view.output_tokens,
            "cached_prompt_tokens": view.cached_prompt_tokens,
        },
        latency={
            "queue_time": _round(latency.queue),
            "ttft": _round(latency.ttft),
            "itl": _round(latency.itl),
            "e2e": _round(latency.e2e),
        },
        preemptions=view.num_preemptions,
    )


def aborted(when: When, view: RequestView) -> dict[str, Any]:
    """The request ended without finishing: aborted, rejected by vLLM, or left unfinished
    when stepview stopped (``state``), and why (``error``)."""
    return when.event(
        ABORTED,
        id=view.request_id,
        state=view.state.value,
        error=view.error,
        output_tokens=view.output_tokens,
        preemptions=view.num_preemptions,
    )


def step(
    when: When,
    *,
    running: int,
    waiting_by_reason: dict[str, int],
    kv_cache_usage: float,
    budget: StepBudget | None,
    step_time: float,
    steps: int,
) -> dict[str, Any]:
    """The engine after a step: requests running, waiting by reason (they add up to
    ``waiting``), KV cache use, and how the step spent its token budget (the plug-in's;
    ``None`` without it). ``steps``: engine steps since the last ``step`` event."""
    return when.event(
        STEP,
        running=running,
        waiting=sum(waiting_by_reason.values()),
        waiting_by_reason=waiting_by_reason,
        kv_cache_usage=round(kv_cache_usage, 6),
        budget=None
        if budget is None
        else {
            "max_tokens": budget.max_tokens,
            "prefill_tokens": budget.prefill_tokens,
            "decode_tokens": budget.decode_tokens,
            "free_blocks": budget.free_blocks,
            "total_blocks": budget.total_blocks,
        },
        step_time=round(step_time, 6),
        steps=steps,
    )


def server(
    when: When,
    state: str,
    address: str,
    labels: dict[str, str],
    behind: float | None,
    message: str,
) -> dict[str, Any]:
    """A server of a fleet came up, went down, fell behind, joined or left (``state``)."""
    event = when.event(SERVER, state=state, labels=labels, behind=_round(behind), message=message)
    event["server"] = address
    return event


def dropped(count: int, first: int, last: int, why: str, time: float) -> dict[str, Any]:
    """To one reader of the stream: it will not get the events ``first`` to ``last``
    (``count`` of them), because it fell behind (``behind``) or asked for more than the
    buffer still holds (``buffer``). A reconnect with ``Last-Event-ID`` may still get those
    the buffer holds."""
    return {
        "event": DROPPED,
        "v": VERSION,
        "count": count,
        "first": first,
        "last": last,
        "why": why,
        "time": round(time, 6),
    }


def schema_path() -> Path:
    """The JSON Schema of the events, as installed with the package."""
    return Path(str(resources.files("stepview.events") / "events.schema.json"))
