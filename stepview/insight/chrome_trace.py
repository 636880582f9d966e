"""``--export-chrome-trace``: a run as Chrome Trace Event Format JSON, for Perfetto.

ui.perfetto.dev and chrome://tracing already know how to pan, zoom, measure and query a
timeline; stepview only has to say what happened. One process stands for the run; each
request is a thread of it (named by ``M`` metadata events: its id and the start of its
prompt, sorted by arrival), holding one complete event (``X``) per segment of its
:mod:`~stepview.insight.timeline` (waiting, prefill, decode, preempted) and an instant event
(``i``) per preemption. Counter events (``C``) give the engine's figures per step from
:mod:`~stepview.insight.counters`: KV cache usage, running and waiting requests (the scheduler's
state after the step, at its end) and the step's prefill and decode tokens (from the step's
start, back to 0 at its end unless the next step starts right then: tokens are only computed
inside a step).

This module computes the object; :mod:`stepview.files.chrome_trace_file` writes it.

Times are integer microseconds on the driver clock (0 = engine start; the clocks the
timelines keep are rounded to the microsecond already), so consecutive segments of a request
tile exactly and never overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from stepview.insight.counters import CounterPoint
from stepview.insight.timeline import RequestTimeline, TimelineTracker
from stepview.model.snapshot import RequestState

PID: Final = 1
PROMPT_CHARS: Final = 32  # of the prompt in a request's track name
# chrome://tracing's reserved colour names (Perfetto colours by slice name instead).
_COLOUR: Final = {"waiting": "grey", "prefill": "yellow", "decode": "good", "preempted": "terrible"}
# The counter tracks: event name and the series it holds (Perfetto names a track
# "<name> <series>").
KV_COUNTER: Final = "KV cache"
RUNNING_COUNTER: Final = "running"
WAITING_COUNTER: Final = "waiting"
TOKENS_COUNTER: Final = "tokens per step"


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def track_name(timeline: RequestTimeline) -> str:
    """``id: start of the prompt`` (whitespace folded), or the prompt's token count when the
    request came as token ids."""
    view = timeline.view
    if view is None:
        return timeline.request_id
    prompt = " ".join(view.prompt.split())
    if not prompt:
        return f"{timeline.request_id} ({view.prompt_tokens} prompt tokens)"
    if len(prompt) > PROMPT_CHARS:
        prompt = prompt[: PROMPT_CHARS - 1] + "…"
    return f"{timeline.request_id}: {prompt}"


def _arrival(timeline: RequestTimeline) -> float:
    return 0.0 if timeline.view is None else timeline.view.timings.arrival


def request_events(
    timeline: RequestTimeline, tid: int, step: int, clock: float
) -> list[dict[str, Any]]:
    """One request's track: its name, its segments as ``X`` events, its preemptions as ``i``
    events; a request that never ran (rejected) gets an instant at its end saying so.
    ``step``/``clock`` are the latest snapshot's, where an unfinished last segment stops."""
    base = {"pid": PID, "tid": tid}
    rid = timeline.request_id
    events: list[dict[str, Any]] = [
        {**base, "ph": "M", "name": "thread_name", "args": {"name": track_name(timeline)}},
        {**base, "ph": "M", "name": "thread_sort_index", "args": {"sort_index": tid}},
    ]
    records = timeline.records(step, clock)
    for segment in records["timeline"]:
        start, end = _us(segment["start"]), _us(segment["end"])
        args: dict[str, Any] = {"request_id": rid}
        args.update((k, v) for k, v in segment.items() if k not in ("state", "start", "end"))
        if args.get("reason") is None:
            args.pop("reason", None)
        state = segment["state"]
        events.append(
            {
                **base,
                "ph": "X",
                "name": state,
                "cat": "request",
                "ts": start,
                "dur": max(0, end - start),
                "cname": _COLOUR[state],
                "args": args,
            }
        )
    for preemption, record in zip(timeline.preemptions, records["preemptions"], strict=True):
        events.append(
            {
                **base,
                "ph": "i",
                "s": "t",
                "name": "preempted",
                "cat": "preemption",
                "ts": _us(preemption.clock),
                "args": {"request_id": rid, **record},
            }
        )
    view = timeline.view
    if not records["timeline"] and view is not None and view.state is RequestState.REJECTED:
        when = view.timings.finished
        events.append(
            {
                **base,
                "ph": "i",
                "s": "t",
                "name": "rejected",
                "cat": "request",
                "ts": _us(view.timings.arrival if when is None else when),
                "args": {"request_id": rid, "error": view.error},
            }
        )
    return events


def counter_events(points: Sequence[CounterPoint]) -> list[dict[str, Any]]:
    """The counter tracks, one sample per step (see the module docstring for when)."""
    events: list[dict[str, Any]] = []
    base = {"pid": PID, "ph": "C"}
    for index, point in enumerate(points):
        start, end = _us(point.start), _us(point.end)
        tokens = {"prefill": point.prefill_tokens, "decode": point.decode_tokens}
        events.append({**base, "name": TOKENS_COUNTER, "ts": start, "args": tokens})
        following = points[index + 1] if index + 1 < len(points) else None
        if following is None or _us(following.start) > end:
            idle = {"prefill": 0, "decode": 0}
            events.append({**base, "name": TOKENS_COUNTER, "ts": end, "args": idle})
        usage = {"usage %": round(point.kv_usage * 100, 2)}
        events.append({**base, "name": KV_COUNTER, "ts": end, "args": usage})
        events.append(
            {**base, "name": RUNNING_COUNTER, "ts": end, "args": {"requests": point.running}}
        )
        events.append(
            {**base, "name": WAITING_COUNTER, "ts": end, "args": {"requests": point.waiting}}
        )
    return events


def chrome_trace(
    tracker: TimelineTracker, points: Sequence[CounterPoint], *, title: str = "stepview run"
) -> dict[str, Any]:
    """The whole run as a Trace Event Format object (``traceEvents``, ``displayTimeUnit``).

    Requests are numbered (thread ids from 1) in order of arrival, so the tracks read top to
    bottom as the requests came.
    """
    timelines = sorted(
        (t for t in tracker if t.view is not None), key=lambda t: (_arrival(t), t.request_id)
    )
    events: list[dict[str, Any]] = [
        {"pid": PID, "ph": "M", "name": "process_name", "args": {"name": title}},
    ]
    for tid, timeline in enumerate(timelines, start=1):
        events.extend(request_events(timeline, tid, tracker.step, tracker.clock))
    events.extend(counter_events(points))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"source": "stepview", "title": title, "requests": len(timelines)},
    }
