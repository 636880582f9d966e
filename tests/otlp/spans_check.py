"""What every test of the OTLP output checks of the spans a receiver got."""

from __future__ import annotations

import itertools
from collections import defaultdict

from stepview.testing.otlp_receiver import ReceivedSpan


def by_request(spans: list[ReceivedSpan]) -> dict[str, tuple[ReceivedSpan, list[ReceivedSpan]]]:
    """Each of stepview's request spans with its phase spans (not vLLM's span beside them),
    by request id."""
    children: dict[str, list[ReceivedSpan]] = defaultdict(list)
    for span in spans:
        if span.parent_id is not None and "stepview.phase" in span.attributes:
            children[span.parent_id].append(span)
    out = {}
    for span in spans:
        rid = span.attributes.get("stepview.request.outcome") and span.attributes.get(
            "gen_ai.request.id"
        )
        if rid:
            phases = sorted(children[span.span_id], key=lambda s: s.start_ns)
            out[str(rid)] = (span, phases)
    return out


def queued(phases: list[ReceivedSpan]) -> float:
    """Seconds in the waiting spans before the first prefill."""
    total = 0.0
    for span in phases:
        if span.attributes["stepview.phase"] != "waiting":
            break
        total += span.seconds
    return total


def check_tiling(request: ReceivedSpan, phases: list[ReceivedSpan]) -> None:
    """The phases lie inside the request span, in order, without overlapping."""
    assert phases, request.name
    assert all(p.trace_id == request.trace_id for p in phases)
    assert request.start_ns <= phases[0].start_ns
    for before, after in itertools.pairwise(phases):
        assert before.end_ns <= after.start_ns + 1, (before.name, after.name)
    assert phases[-1].end_ns <= request.end_ns + 1
