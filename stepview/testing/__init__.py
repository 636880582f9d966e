"""Test doubles, fixed scenes and a real server: for the tests, screenshots and benchmarks.

``fake_engine``
    a deterministic engine with vLLM's scheduling policy in miniature, which writes the record
    vLLM's engine core would and reads it with the real code (states, wait reasons, budget).
``snapshots`` / ``story`` / ``sources`` / ``scenes``
    hand-made snapshots (a run caught mid-way; a short story of chunked prefill and a
    preemption), sources that stand still, and the app set up for a repeatable picture with
    the key presses that lead to each pictured view.
``fleet_scene``
    a fixed fleet of four servers (overloaded, two ranks, one down) for the fleet screen's
    picture.
``vllm_server``
    vLLM's real API server on the demo model with stepview's plug-in, started as
    docs/attach-and-fleet.md says, for the real-server tests and the server benchmarks;
    killed whole, whatever happens.
``otlp_receiver``
    a real OTLP/gRPC trace receiver (OpenTelemetry's ``TraceService`` over grpcio, as vLLM's
    own tests build it) that keeps the spans it is sent, for the OTLP output's tests.
``prometheus``
    a real Prometheus (Debian's package) on a free port, queried through its HTTP API: the
    rules', the dashboard's and the discovery's tests judge stepview by what it makes of them.

Nothing a real run uses imports this package (import-linter checks it). The SVG snapshot
tests and ``scripts/screenshots.py`` draw the same scenes, so a README picture changes only
when the UI does. The scenes need no engine and no clock: the same scene draws the same
screen anywhere (only ``vllm_server`` starts a real engine, in a server of its own).
"""
