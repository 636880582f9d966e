"""W3C trace context (``traceparent``) and the span ids stepview gives a request's spans.

A request joins the trace its client started when it arrived with a ``traceparent`` header
(vLLM keeps it in its scheduler's ``Request.trace_headers``; the plug-in passes it on), and
stepview's request span becomes a child of the client's span. Stepview's own engine has no
client: it starts the trace itself (:func:`own_context`) and hands vLLM the context of its
request span, so vLLM's ``llm_request`` span sits inside it.

Span ids are *derived*, not drawn: a hash of the trace id, the request id and the part
(``request``, ``phase 3``, ...). So the same request exported twice (live, and later from its
recording) gives the same spans, which a trace backend then stores once; and a context that
stepview made for its own engine is told from a client's by its span id alone: it is the
request span's own derived id (:func:`request_ids`), so the request span is that trace's root.
Plain computation on strings and ints: no OpenTelemetry, no I/O.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Final, NamedTuple

TRACEPARENT: Final = "traceparent"
_PATTERN: Final = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_SAMPLED: Final = 0x01


class SpanContext(NamedTuple):
    """A parsed ``traceparent``: the trace, the span that is the parent, its flags."""

    trace_id: int
    span_id: int
    flags: int = _SAMPLED


def parse_traceparent(text: str) -> SpanContext | None:
    """The context a ``traceparent`` header holds; ``None`` for anything W3C calls invalid
    (wrong shape, version ``ff``, an all-zero trace or span id)."""
    match = _PATTERN.match(text.strip().lower())
    if match is None or match.group(1) == "ff":
        return None
    if match.group(1) == "00" and len(text.strip()) != 55:
        return None
    trace_id, span_id = int(match.group(2), 16), int(match.group(3), 16)
    if not trace_id or not span_id:
        return None
    return SpanContext(trace_id, span_id, int(match.group(4), 16))


def format_traceparent(context: SpanContext) -> str:
    """``00-<trace id>-<span id>-<flags>``, as the header is written."""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.flags:02x}"


def derived_id(bits: int, *parts: object) -> int:
    """A non-zero id of ``bits`` bits (64 for a span, 128 for a trace) hashed from ``parts``."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=bits // 8)
    return int.from_bytes(digest.digest(), "big") or 1


def span_id_of(trace_id: int, request_id: str, part: str) -> int:
    """The id of one of a request's spans (``part``: ``request``, ``phase 0``, ...)."""
    return derived_id(64, f"{trace_id:032x}", request_id, part)


def own_context(request_id: str) -> str:
    """The ``traceparent`` stepview's own engine gives a request it adds: a new trace whose
    span is the request span stepview will export, so vLLM's own span becomes its child."""
    trace_id = int.from_bytes(os.urandom(16), "big") or 1
    return format_traceparent(SpanContext(trace_id, span_id_of(trace_id, request_id, "request")))


class RequestIds(NamedTuple):
    """Where a request's span goes: its trace, its own id, its parent (``None``: a root)."""

    trace_id: int
    span_id: int
    parent_id: int | None
    sampled: bool = True


def request_ids(traceparent: str, request_id: str, fallback_trace: int) -> RequestIds:
    """The request span's ids: under the client's span when the request came with a
    context; the root of the trace stepview made for it (:func:`own_context`); or, with no
    (valid) context, the root of a trace of its own, ``fallback_trace``."""
    context = parse_traceparent(traceparent) if traceparent else None
    if context is None:
        trace_id = fallback_trace
        return RequestIds(trace_id, span_id_of(trace_id, request_id, "request"), None)
    own = span_id_of(context.trace_id, request_id, "request")
    sampled = bool(context.flags & _SAMPLED)
    parent = None if context.span_id == own else context.span_id
    return RequestIds(context.trace_id, own, parent, sampled)
