"""What stepview costs, measured side by side: ``python -m benchmarks NAME [args...]``.

Run from the repository root (``python -m`` finds this package on the path, and the root is
on it only as the current directory); ``python -m benchmarks --list`` names them all. None
is a timed test: each prints its figures, and ``tests/bench/`` checks only that each runs
(``--quick``, ``engine_overhead --smoke`` on a fake engine, the server ones on the test
suite's shared servers) and prints its lines in the format below. The benchmarks that start
an engine take the machine to themselves: run them alone (``flock
/tmp/stepview-engine.lock ...`` on a shared one). Each module's docstring says what it
measures, how, and why it is counted that way.

The benchmarks, and the last line each prints:

``engine_overhead``
    vLLM's bare loop against stepview's driver, driver + recording and the full TUI in tmux,
    on one seeded workload: ``ratios: driver/bare=X tui/bare=Y``.
``core_cpu``
    the CPU time stepview's plug-in adds to an engine core in its own process, in interleaved
    pairs: ``core cpu: driver@mp/bare=X (median of N pairs)``.
``capture_cost``
    stepview's work per engine step (capture, the log of ends, publish, view, watch, driver)
    with 64 to 8 192 requests held, and beside the capture what watching for a hung step costs
    (the plug-in's stack watch, against faulthandler's watchdog armed around each step):
    ``scaling: capture_us=A,B,C,D log_us=... publish_us=... view_us=... watch_us=...
    driver_us=... attach_ms=A,B,C,D`` (the last: what a watch joining costs one step).
``server_overhead``
    vLLM's API server's throughput alone, with the plug-in, and with ``stepview --attach``
    watching: ``ratios: plugin/alone=X attached/alone=Y``.
``long_queue``
    a real server holding thousands of waiting requests, watched: how far behind the view
    falls and what it costs: ``long queue: attached/plugin=X behind_max_s=Y catch_up_s=Z``.
``event_delay``
    an event of ``--events`` from the engine's step to a reader of the HTTP stream beside a
    busy plug-in server, against vLLM's ``/metrics`` polled for the same change, and the
    server's throughput with a reader that reads nothing against without:
    ``event_delay: events=N p50_ms=A p99_ms=B finished_p50_ms=C finished_p99_ms=D
    metrics_p50_ms=E metrics_p99_ms=F silent_reader_throughput=R``.
``ui_scale``
    the TUI with 1 000 running and 10 000 finished requests on a real terminal (no vLLM):
    one labelled line per figure, ``history: N bytes per request per step (...)`` last.
``flight_size``
    the flight recorder's bytes per minute and encoding time per step by batch size, on the
    fake engine (no vLLM): ``flight_size: mb_per_min_64=A mb_per_min_1000=B
    us_per_step_64=C us_per_step_1000=D``.
``watch_memory``
    an attached headless watch fed a million requests by a synthetic core (no vLLM), its
    memory as they pass: ``watch_memory: rss_mb_10k=A rss_mb_100k=B rss_mb_1m=C``.
``fleet_scale``
    one headless watch of 64 simulated servers (48 plug-in, 16 ``/metrics``; no vLLM): its
    CPU per server and how far behind it falls: ``fleet_scale: servers=64
    cpu_pct_per_server=X lag_s_p50=A lag_s_max=B rss_mb=R cpu_pct=C up=U``.
``fleet_keys``
    the fleet screen of the same 64 simulated servers in tmux: how long a key (cursor, sort,
    filter, Enter, Esc) takes to show, one checkout beside another (``--tree``):
    ``fleet_keys: servers=64 rounds=R LABEL_key_s_p50=A LABEL_key_s_max=B LABEL_up_s=U``.
``otlp_export``
    ``--otlp-traces-endpoint`` on stepview's own engine, on against off in interleaved pairs,
    into a real OTLP/gRPC receiver: ``otlp_export: per_request_us=A on/off=B (median of N
    pairs)``.
``watch_server_rss``
    an attached headless watch beside a real server under a steady load, its memory by
    minute and whether its results file holds every request the clients completed:
    ``watch_server_rss: minutes=M requests=N results=R unseen=U caught_up=C rss_mb_first=A
    rss_mb_last=B rss_mb_max=C flight=ok|missing``.
``fuzz``
    every parser of outside input (traces, prompts and results files, file_sd, Prometheus'
    answers, ``/metrics`` pages, the plug-in's records, flight recordings) fuzzed by
    ``tests/fuzz/`` with Hypothesis' long profile, seed after seed, for ``--minutes`` (no
    vLLM): ``fuzz: minutes=M runs=R examples_per_test=N failed=F``.

What they share (not runnable on their own):

``workload``
    the seeded workload and the environment the engine benchmarks run it under: their figures
    compare only if they measure the same work.
``capture_attach``
    ``capture_cost``'s attach figure: a watch joining its engine mid-run, the most one
    step's plug-in work grew.
``overhead_runs``
    one run of one ``engine_overhead`` variant: the child processes and the TUI in tmux.
``overhead_measurement``
    what such a run reports (a ``Measurement``), and the bare variants' timed loop: made by
    the runs on vLLM and on the fake engine alike.
``fake_engine_runs``
    ``engine_overhead --smoke``: its variants on stepview's fake engine instead of vLLM, the
    plumbing and every line of the report in seconds (the smoke test's run).
``tmux_pane``
    stepview in a private tmux server, as a user runs it.
``ui_scale_source``
    the prepared snapshots ``ui_scale`` publishes at a fixed rate.
``fleet_servers``
    the simulated fleet ``fleet_scale`` and ``fleet_keys`` watch, in one process of its own.
``synthetic_core``
    a synthetic vLLM engine core stepping a queue of requests as records of change, for the
    benchmarks that watch a server without running one.
``given_server``
    ``--server URL --publish ADDRESS``: a server benchmark measures a server already running
    (the smoke tests hand in the test suite's shared ones) instead of starting its own.
``children``
    how a benchmark starts a fresh Python (``python -m benchmarks.x``, the root on
    ``PYTHONPATH``), so it runs from any directory.
``__main__``
    the ``python -m benchmarks`` command.

vLLM's API server the server benchmarks start is :mod:`stepview.testing.vllm_server`, shared
with the real-server tests.
"""

from __future__ import annotations

BENCHMARKS = (
    "capture_cost",
    "core_cpu",
    "engine_overhead",
    "event_delay",
    "flight_size",
    "fuzz",
    "fleet_keys",
    "fleet_scale",
    "long_queue",
    "otlp_export",
    "server_overhead",
    "ui_scale",
    "watch_memory",
    "watch_server_rss",
)
"""The modules ``python -m benchmarks NAME`` runs (each has ``main(argv) -> int``); the rest
of the package is what they share."""
