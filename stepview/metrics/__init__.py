"""Prometheus metrics of a run (``--metrics-port``): what vLLM's own ``/metrics`` cannot say.

``families``
    every metric by name, type, labels and help text, in a registry of stepview's own.
``waiting``
    waiting requests by stepview's reason and engine core, counted from what a step changed
    (most wait for their queue's reason and are not looked at one by one).
``exporter``
    the driver sink that writes each snapshot's figures into the metrics, at O(changes).
``server``
    ``prometheus_client``'s HTTP server on a daemon thread; a port it cannot have is one
    line, before the engine starts.
``prometheus/``
    recording and alerting rules over these metrics (and vLLM's), with their ``promtool``
    unit tests: package data, for a Prometheus to load.

Fed by snapshots and the run insight only: no vLLM, no torch, no Textual, no engine (a
contract in ``pyproject.toml``), so the same metrics come from a run of stepview's own engine
and from a watch of a server (``--attach``) on a laptop.
"""
