"""The one module that imports OpenTelemetry: spans of plain data out to an OTLP endpoint.

It is imported only when ``--otlp-traces-endpoint`` is given (the SDK and its exporters are
the optional extra ``otlp``; vLLM installs them too), and an import-linter contract keeps
every other module off ``opentelemetry``. What it does is the SDK's standard pipeline, with
the standard environment: an OTLP exporter over gRPC, or HTTP/protobuf when
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` (or ``OTEL_EXPORTER_OTLP_PROTOCOL``) says
``http/protobuf`` (the endpoint then ends in ``/v1/traces``), its headers, timeout and TLS
from ``OTEL_EXPORTER_OTLP_*``; a resource from ``OTEL_SERVICE_NAME`` and
``OTEL_RESOURCE_ATTRIBUTES`` (``service.name`` ``stepview`` when neither names one); a
``BatchSpanProcessor`` (``OTEL_BSP_*``) whose thread does every export.

The spans were built after the fact (:mod:`stepview.insight.spans`), with their own times
and ids, so no tracer makes them: each becomes a finished ``ReadableSpan`` handed straight to
the processor's ``on_end``, which only puts it in its queue. The queue is bounded; rather
than let the SDK push out its oldest span unseen, :meth:`SpanExport.send` drops the new one
when the queue is full, and counts it, as it counts the spans of every batch the endpoint did
not take (down, slow past its timeout, refusing).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from stepview.insight.spans import SpanData
from stepview.version import installed_version

GRPC = "grpc"
HTTP = "http/protobuf"
DEFAULT_QUEUE = 2048  # the SDK's own default for OTEL_BSP_MAX_QUEUE_SIZE
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def protocol() -> str:
    """The OTLP protocol the environment asks for (vLLM reads the same variable)."""
    chosen = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", GRPC
    )
    return chosen.strip().lower()


def _otlp_exporter(endpoint: str) -> SpanExporter:
    chosen = protocol()
    if chosen == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=endpoint)
    if chosen == HTTP:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )

        return HttpExporter(endpoint=endpoint)
    raise ValueError(
        f"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL={chosen!r}: stepview sends {GRPC} or {HTTP}"
    )


def _resource() -> Resource:
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "stepview"}))
    return resource


class _Counting(SpanExporter):
    """The OTLP exporter, counting what it took and what it failed to deliver (on the
    processor's thread)."""

    def __init__(self, inner: SpanExporter, on_failed: Callable[[int], None]) -> None:
        self.inner = inner
        self.taken = 0  # spans handed to the endpoint's exporter, delivered or not
        self.failed = 0
        self._on_failed = on_failed
        self._exporting = 0  # spans of the batch under way
        self._idle = threading.Condition()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._idle:
            self.taken += len(spans)
            self._exporting = len(spans)
        try:
            result = self.inner.export(spans)
        except Exception:  # the SDK would only log it: a batch lost all the same
            result = SpanExportResult.FAILURE
        with self._idle:
            if result is not SpanExportResult.SUCCESS:
                self.failed += len(spans)
            self._exporting = 0
            self._idle.notify_all()
        if result is not SpanExportResult.SUCCESS:
            self._on_failed(len(spans))
        return result

    def settle(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) for the batch under way to end; if it does not,
        count it as failed: its fate is not known, and the run does not wait for it."""
        with self._idle:
            if not self._idle.wait_for(lambda: not self._exporting, timeout_s):
                self.failed += self._exporting
                self._exporting = 0

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class SpanExport:
    """An open OTLP export: :meth:`send` from the drivers' threads (one, or a fleet's pool
    workers), :meth:`close` once."""

    def __init__(self, endpoint: str, exporter: SpanExporter | None = None) -> None:
        """``exporter``: another SDK exporter in place of OTLP's (tests, the benchmark)."""
        self.endpoint = endpoint
        self.queue_size = int(os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE") or DEFAULT_QUEUE)
        self._lock = threading.Lock()
        self._sending = threading.Lock()  # a fleet's drivers share the export: one at a time
        self.sent = 0  # spans handed to the processor
        self.full = 0  # spans dropped because its queue was full
        self.on_drop: Callable[[], None] | None = None
        """Called once, on whichever thread saw it, when the first span is lost."""
        self._warned = False
        self._exporter = _Counting(exporter or _otlp_exporter(endpoint), self._failed)
        self._processor = BatchSpanProcessor(self._exporter, max_queue_size=self.queue_size)
        self._resource = _resource()
        self._scope = InstrumentationScope("stepview", installed_version())
        # The SDK's retries and shutdown words go where stepview's log goes (a live run's log
        # file), never raw to the terminal: what was lost is counted and said in one line.
        logging.getLogger("opentelemetry").addHandler(logging.NullHandler())

    @property
    def dropped(self) -> int:
        """Spans that did not reach the endpoint so far: queue full, or a failed batch."""
        return self.full + self._exporter.failed

    @property
    def delivered(self) -> int:
        return self._exporter.taken - self._exporter.failed

    def send(self, spans: Sequence[SpanData]) -> None:
        """Queue ``spans`` for the processor's thread (no I/O here); those that find the
        queue full are dropped and counted."""
        with self._sending:
            room = max(0, self.queue_size - (self.sent - self._exporter.taken))
            for span in spans[:room]:
                self._processor.on_end(self._readable(span))
                self.sent += 1
            lost = max(0, len(spans) - room)
            self.full += lost
        if lost:
            self._warn()

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued, waiting at most ``timeout_s``; what is left then is dropped
        (counted: a receiver that is down does not hold the end of the run)."""
        closing = threading.Thread(
            target=self._processor.shutdown, name="stepview-otlp-close", daemon=True
        )
        closing.start()  # sends what is queued, batch by batch, each retried to its timeout
        closing.join(timeout_s)
        if closing.is_alive():  # the receiver is down or slow: stop the retries, fail the rest
            self._exporter.inner.shutdown()
            closing.join(1.0)
        self._exporter.settle(1.0)
        self.full += max(0, self.sent - self._exporter.taken)
        self.sent = self._exporter.taken
        if self.dropped:
            self._warn()

    def _failed(self, count: int) -> None:
        self._warn()

    def _warn(self) -> None:
        with self._lock:
            if self._warned:
                return
            self._warned = True
        if self.on_drop is not None:
            self.on_drop()

    def _readable(self, span: SpanData) -> ReadableSpan:
        parent = None
        if span.parent_id is not None:
            parent = SpanContext(span.trace_id, span.parent_id, span.remote_parent, _SAMPLED)
        status = Status(StatusCode.UNSET)
        if span.error is not None:
            status = Status(StatusCode.ERROR, span.error)
        return ReadableSpan(
            name=span.name,
            context=SpanContext(span.trace_id, span.span_id, False, _SAMPLED),
            parent=parent,
            resource=self._resource,
            attributes=dict(span.attributes),
            events=[Event(e.name, dict(e.attributes), e.time_ns) for e in span.events],
            kind=SpanKind.INTERNAL,
            status=status,
            start_time=span.start_ns,
            end_time=span.end_ns,
            instrumentation_scope=self._scope,
        )
