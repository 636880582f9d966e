"""Answers from the snapshots: request timelines, latency percentiles, thrash and stall alerts.

Pure analysis over :mod:`stepview.model` data (no vLLM, torch or Textual), so the driver runs
it live, a replay runs it over a trace, and the UI can call it on its history.

``run``
    :class:`~stepview.insight.run.RunInsight`: one run's timelines, latency figures and
    alerts, fed every snapshot by the driver (live) or a replay, so both give the same answers.
``timeline`` / ``segments``
    each request's life as segments (waiting, prefill, decode, preempted) and its
    preemptions, built at O(changes); a waiting queue's shared reason kept as runs of steps.
``stretches``
    a timeline as a person reads it: consecutive waiting (or preempted) segments as one
    stretch, for drawing only.
``percentiles``
    latency figures over finished requests: percentiles (a quantile sketch past a bound), a
    recent window, histogram bins.
``alerts``
    the detectors that turn snapshots into alerts: a request thrashing, the engine stalled,
    the KV cache full with nothing progressing.
``report``
    the end-of-run summary as text (``--headless``, ``--replay TRACE --summary``).
``compare`` / ``compare_report``
    two recorded runs side by side (``--replay A --compare B``): figures, requests matched,
    the first step they scheduled differently; and the same as text.
``counters`` / ``chrome_trace``
    every step's engine figures, kept only when an export asks, and a run as Chrome Trace
    Event Format JSON for Perfetto (``--export-chrome-trace``).
``spans`` / ``trace_context``
    a finished request as OpenTelemetry-shaped spans (plain data: the request with GenAI and
    vLLM's attribute names, a span per phase), and the W3C ``traceparent`` that joins them to
    a client's trace, with the span ids derived from it (``--otlp-traces-endpoint``).
``histogram_window``
    what a server's cumulative Prometheus counters and histograms did over the last seconds:
    increases and quantiles across restarts and missing metrics, no I/O.
``fleet``
    several servers at a glance: one row of figures per server (and rank) read off its latest
    snapshot, and which is busiest and idlest.
``fleet_order``
    which fleet rows are shown, in what order: the fleet screen's sort and filter.
"""
