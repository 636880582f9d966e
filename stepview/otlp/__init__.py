"""``--otlp-traces-endpoint``: each request's story as OpenTelemetry spans, to a trace backend.

The spans themselves are plain data computed in :mod:`stepview.insight.spans`; this package
sends them. Only :mod:`~stepview.otlp.exporter` imports OpenTelemetry (an optional extra,
``otlp``; an import-linter contract says so), and it is imported only when the flag is given.

``sink``
    the driver's sink: each request that ends becomes spans, queued for the export (never any
    network on the driver's thread), placed on the wall clock by the run's epoch
    (:mod:`stepview.model.epoch`).
``exporter``
    the OpenTelemetry SDK's pipeline: OTLP over gRPC or HTTP/protobuf as the standard
    ``OTEL_*`` variables say, a bounded batch processor on its own thread, spans dropped when
    its queue is full or the endpoint fails them, counted.
"""
