"""A real OTLP/gRPC trace receiver for the tests and the benchmark, as vLLM's own tests build it.

vLLM's ``tests/tracing/conftest.py`` serves OpenTelemetry's ``TraceService`` from the
``opentelemetry-proto`` stubs over ``grpcio``; this does the same, on a free port, and keeps
every span it is sent (decoded: ids as hex, attributes as Python values), so a test asks
what a trace backend would hold. Arize Phoenix was tried first (docs/tracing.md says why it
is not the receiver here). ``grpcio`` and ``opentelemetry-proto`` come with vLLM.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the receiver got it."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    status_code: int = 0  # 2: error
    status_message: str = ""

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


class _Service(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self.receiver = receiver

    def Export(self, request: Any, context: Any) -> Any:
        spans = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        ReceivedSpan(
                            span.name,
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex() or None,
                            span.start_time_unix_nano,
                            span.end_time_unix_nano,
                            _attributes(span.attributes),
                            [
                                (e.name, e.time_unix_nano, _attributes(e.attributes))
                                for e in span.events
                            ],
                            resource,
                            span.status.code,
                            span.status.message,
                        )
                    )
        self.receiver.take(spans)
        return trace_service_pb2.ExportTraceServiceResponse()


class OtlpReceiver:
    """Serves OTLP/gRPC on ``127.0.0.1:port`` until :meth:`stop`; :attr:`spans` grows."""

    def __init__(self, port: int = 0) -> None:
        self.spans: list[ReceivedSpan] = []
        self._changed = threading.Condition()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        add = trace_service_pb2_grpc.add_TraceServiceServicer_to_server  # untyped stubs
        add(_Service(self), self._server)  # type: ignore[no-untyped-call]
        self.port = self._server.add_insecure_port(f"127.0.0.1:{port}")
        self._server.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def take(self, spans: list[ReceivedSpan]) -> None:
        with self._changed:
            self.spans.extend(spans)
            self._changed.notify_all()

    def wait_for(
        self, holds: Callable[[list[ReceivedSpan]], bool], timeout: float = 60.0
    ) -> list[ReceivedSpan]:
        """The spans once ``holds`` is true of them (AssertionError after ``timeout``)."""
        with self._changed:
            if not self._changed.wait_for(lambda: holds(self.spans), timeout):
                names = sorted({s.name for s in self.spans})
                raise AssertionError(f"{len(self.spans)} span(s) received, not enough: {names}")
            return list(self.spans)

    def stop(self) -> None:
        self._server.stop(grace=None)
