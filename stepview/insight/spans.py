"""A finished request as OpenTelemetry-shaped spans: plain data, ready for any exporter.

One span for the request, named ``{gen_ai.operation.name} {gen_ai.request.model}`` as the
GenAI semantic conventions name an inference span, with the request's parameters and usage
under ``gen_ai.*`` and vLLM's own latency names (``gen_ai.latency.time_in_queue``,
``time_to_first_token``, ``e2e``, ``time_in_model_prefill`` / ``decode`` / ``inference``:
vLLM's ``SpanAttributes``), so a query written for vLLM's ``llm_request`` span works on
stepview's. Under it, one span per segment of the request's timeline
(:mod:`~stepview.insight.timeline`): each waiting stretch (``stepview.wait.*``: the reason's
code, its sentence, the request it waited behind, the steps it waited), each prefill stretch
with its chunks as events, each decode stretch, each preemption (the tokens it threw away).
Attributes stepview adds are under ``stepview.``.

Times are the timeline's (vLLM's own instants where the engine tells them, else step clocks)
on the driver's clock, placed on the wall clock by ``epoch`` (the wall time, in seconds, of
driver clock 0). Ids come from :mod:`~stepview.insight.trace_context`. Nothing here imports
OpenTelemetry or writes anything: :mod:`stepview.otlp` turns these into the SDK's spans.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from stepview.insight.segments import DECODE, PREEMPTED, PREFILL, WAITING, Segment
from stepview.insight.timeline import RequestTimeline
from stepview.insight.trace_context import derived_id, request_ids, span_id_of
from stepview.model.snapshot import RequestState, RequestView

AttributeValue = str | bool | int | float | Sequence[str]
Attributes = Mapping[str, AttributeValue]

CHAT: Final = "chat"
COMPLETION: Final = "text_completion"
# What became of a request (``stepview.request.outcome``); ``cut_off``: the run ended first.
OUTCOMES: Final = {
    RequestState.FINISHED: "finished",
    RequestState.ABORTED: "aborted",
    RequestState.REJECTED: "rejected",
    RequestState.UNFINISHED: "cut_off",
}


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """Something that happened at one instant of a span (a prefill chunk, a preemption)."""

    name: str
    time_ns: int
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SpanData:
    """One span, as an exporter needs it; ``parent_id`` ``None``: the root of its trace."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start_ns: int
    end_ns: int
    attributes: Attributes
    events: tuple[SpanEvent, ...] = ()
    error: str | None = None  # the span's status is ERROR, with this description
    remote_parent: bool = False  # the parent is another process's span (the client's)


@dataclass(frozen=True, slots=True)
class RequestSpans:
    """A request's spans, the request span first; ``sampled`` False: its client asked that
    the trace not be recorded (its ``traceparent``'s flags), so none is exported."""

    spans: tuple[SpanData, ...]
    sampled: bool = True


def _ns(epoch: float, clock: float) -> int:
    return round((epoch + clock) * 1e9)


def operation(view: RequestView) -> str:
    """``gen_ai.operation.name``: ``chat`` for a chat request, else ``text_completion``."""
    return CHAT if view.messages else COMPLETION


def request_spans(
    view: RequestView, timeline: RequestTimeline | None, model: str, epoch: float
) -> RequestSpans:
    """The spans of one request that reached a final state (``timeline``: its segments and
    preemptions; ``None`` when none was kept: the request span alone)."""
    ids = request_ids(view.trace_context, view.request_id, _own_trace(view, epoch))
    timings = view.timings
    segments = [] if timeline is None else timeline.segments
    end = timings.finished
    if end is None:
        end = segments[-1].end if segments else timings.arrival
    start = min(timings.arrival, segments[0].start) if segments else timings.arrival
    end = max(end, start)
    outcome = OUTCOMES.get(view.state, view.state.value)
    error = None
    if view.state is RequestState.ABORTED or view.state is RequestState.REJECTED:
        error = f"{outcome}: {view.error}" if view.error else outcome
    events = [
        SpanEvent(
            "preempted",
            _ns(epoch, p.clock),
            {
                "stepview.preemption.step": p.step,
                "stepview.preemption.tokens_lost": p.computed_tokens_lost,
                "stepview.preemption.kv_usage_before": round(p.kv_usage_before, 4),
            },
        )
        for p in ([] if timeline is None else timeline.preemptions)
    ]
    if timings.first_token is not None:
        events.insert(0, SpanEvent("first token", _ns(epoch, timings.first_token)))
    if view.state is RequestState.UNFINISHED:
        events.append(SpanEvent("cut off by the end of the run", _ns(epoch, end)))
    request = SpanData(
        f"{operation(view)} {model}",
        ids.trace_id,
        ids.span_id,
        ids.parent_id,
        _ns(epoch, start),
        _ns(epoch, end),
        request_attributes(view, model, outcome, timeline),
        tuple(events),
        error,
        remote_parent=ids.parent_id is not None,
    )
    phases = [
        _phase_span(segment, index, view.request_id, ids.trace_id, ids.span_id, epoch)
        for index, segment in enumerate(segments)
    ]
    return RequestSpans((request, *phases), ids.sampled)


def _own_trace(view: RequestView, epoch: float) -> int:
    """The trace of a request that came with no context: derived from the run's epoch and
    the request, so exporting the same recording again gives the same trace."""
    return derived_id(128, round(epoch, 3), view.request_id, view.timings.arrival)


def request_attributes(
    view: RequestView, model: str, outcome: str, timeline: RequestTimeline | None
) -> dict[str, AttributeValue]:
    """The request span's attributes: GenAI conventions, vLLM's names, stepview's own."""
    spec = view.spec
    reasons = [c.finish_reason for c in view.completions if c.finish_reason]
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": operation(view),
        "gen_ai.system": "vllm",
        "gen_ai.request.model": model,
        "gen_ai.response.model": model,
        "gen_ai.request.id": view.request_id,  # vLLM's name for it
        "gen_ai.response.id": view.request_id,
        "gen_ai.request.max_tokens": spec.max_tokens,
        "gen_ai.request.temperature": spec.temperature,
        "gen_ai.request.top_p": spec.top_p,
        "gen_ai.request.n": spec.n,  # vLLM's name; the conventions' choice.count below
        "gen_ai.request.choice.count": spec.n,
        "gen_ai.usage.input_tokens": view.prompt_tokens,
        "gen_ai.usage.output_tokens": view.output_tokens,
        "gen_ai.usage.prompt_tokens": view.prompt_tokens,  # vLLM's names for the two
        "gen_ai.usage.completion_tokens": view.output_tokens,
        "gen_ai.response.finish_reasons": reasons,
        "stepview.request.outcome": outcome,
        "stepview.request.samples": spec.n,
        "stepview.request.preemptions": view.num_preemptions,
        "stepview.request.cached_prompt_tokens": view.cached_prompt_tokens,
    }
    if spec.top_k:
        attributes["gen_ai.request.top_k"] = spec.top_k
    if spec.seed is not None:
        attributes["gen_ai.request.seed"] = spec.seed
    if spec.stop:
        attributes["gen_ai.request.stop_sequences"] = list(spec.stop)
    if spec.presence_penalty:
        attributes["gen_ai.request.presence_penalty"] = spec.presence_penalty
    if spec.frequency_penalty:
        attributes["gen_ai.request.frequency_penalty"] = spec.frequency_penalty
    if view.error:
        attributes["stepview.request.error"] = view.error
    if timeline is not None and timeline.preemptions:
        attributes["stepview.request.tokens_lost"] = timeline.tokens_lost
    attributes.update(latencies(view))
    return attributes


def latencies(view: RequestView) -> dict[str, float]:
    """vLLM's ``gen_ai.latency.*`` figures from the request's timings (seconds), those it
    has: a request never scheduled has no queue time, one that made no token no TTFT."""
    t = view.timings
    out: dict[str, float] = {}
    if t.scheduled is not None:
        out["gen_ai.latency.time_in_queue"] = t.scheduled - t.arrival
    if t.first_token is not None:
        out["gen_ai.latency.time_to_first_token"] = t.first_token - t.arrival
        if t.scheduled is not None:
            out["gen_ai.latency.time_in_model_prefill"] = t.first_token - t.scheduled
    if t.finished is not None:
        out["gen_ai.latency.e2e"] = t.finished - t.arrival
        if t.first_token is not None:
            out["gen_ai.latency.time_in_model_decode"] = t.finished - t.first_token
        if t.scheduled is not None:
            out["gen_ai.latency.time_in_model_inference"] = t.finished - t.scheduled
    return out


def _phase_span(
    segment: Segment, index: int, request_id: str, trace_id: int, parent: int, epoch: float
) -> SpanData:
    attributes: dict[str, AttributeValue] = {
        "stepview.phase": segment.state,
        "stepview.steps.first": segment.first_step,
        "stepview.steps.last": segment.last_step,
        "stepview.steps": segment.last_step - segment.first_step + 1,
    }
    name = segment.state
    events: tuple[SpanEvent, ...] = ()
    if segment.state in (WAITING, PREEMPTED) and segment.reason is not None:
        name = f"{segment.state}: {segment.reason}"
        attributes["stepview.wait.reason"] = segment.reason
        attributes["stepview.wait.steps"] = segment.last_step - segment.first_step + 1
        if segment.text:
            attributes["stepview.wait.text"] = segment.text
        if segment.blocker:
            attributes["stepview.wait.behind"] = segment.blocker
    if segment.state == PREFILL:
        attributes["stepview.prefill.tokens"] = segment.tokens
        chunks = segment.chunks or []
        attributes["stepview.prefill.chunks"] = len(chunks)
        events = tuple(
            SpanEvent(
                "prefill chunk",
                _ns(epoch, chunk_start),
                {"stepview.step": step, "stepview.prefill.chunk_tokens": tokens},
            )
            for step, chunk_start, _, tokens in chunks
        )
    elif segment.state == DECODE:
        attributes["stepview.decode.tokens"] = segment.tokens
    elif segment.state == PREEMPTED:
        attributes["stepview.preemption.tokens_lost"] = segment.tokens
    start = _ns(epoch, segment.start)
    return SpanData(
        name,
        trace_id,
        span_id_of(trace_id, request_id, f"phase {index}"),
        parent,
        start,
        max(start, _ns(epoch, segment.end)),
        attributes,
        events,
    )
