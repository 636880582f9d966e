"""A server watched through its ``/metrics`` page alone (``--attach http://HOST:PORT``).

No plug-in, no records and no driver: a thread scrapes the page and makes a snapshot of each
scrape, which the UI reads as it reads the driver's.

``page_samples``
    a page's lines read into samples as prometheus_client's parser reads them (a lean
    reader for plain text, the parser for the rest).
``metrics_page``
    vLLM's Prometheus page parsed: the families stepview reads, per engine (rank).
``metrics_watch``
    :class:`~stepview.engine.watch.metrics.metrics_watch.MetricsWatch`: one per server,
    scrapes turned into snapshots (rates, latency windows, the served model).
``metrics_source``
    the thread that feeds a watch's snapshots to the TUI (paused and stepped as any
    watched server: the scrapes go on).
``kv_event_wire`` / ``kv_blocks`` / ``kv_events_watch``
    the server's KV-cache events (``--kv-events``): decoded without vLLM, folded into block
    churn and prefix reuse, subscribed to beside ``/metrics``.
"""
