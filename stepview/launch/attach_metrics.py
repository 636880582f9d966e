"""``stepview --attach http://HOST:PORT``: a vLLM server watched through its ``/metrics`` alone.

For a server that cannot be restarted with stepview's plug-in: the TUI's header counters and
sparklines, latency percentiles over a sliding window, and why requests wait, from the
Prometheus page every vLLM server serves (:mod:`stepview.engine.watch.metrics.metrics_watch`). There
is no request to show: the panes make way for the server's panel, which says once how to
restart this server for the per-request view. ``--headless`` prints one JSON line per scrape
(the server's address on each, for a log that gathers several) until Ctrl+C, SIGTERM or
SIGHUP, which end it normally (exit 0); stderr says when the server is lost and back.

Nothing here imports vLLM: the server runs elsewhere.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from stepview.engine.watch.metrics.kv_events_watch import KvEventsWatch, kv_record
from stepview.engine.watch.metrics.metrics_watch import MetricsWatch
from stepview.insight.fleet import rank_record
from stepview.launch.attach_headless import LinkNotices
from stepview.launch.compose import start_watch
from stepview.launch.exits import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    fail,
    notice,
    silence,
    stop_on_signals,
)
from stepview.launch.runner import run_app
from stepview.model.address import MetricsUrl
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.run.spec import RunSpec

PLUGIN_NOTE = "per-request view: restart the server with stepview's plug-in, then watch it:"


def run_metrics_attach(spec: RunSpec, log_path: Path) -> int:
    """Watch the server at ``spec.watch.name`` through its ``/metrics``; the exit code."""
    from stepview.engine.watch.api.api_key import resolve_api_key
    from stepview.engine.watch.api.server_api import ServerApi
    from stepview.engine.watch.metrics.metrics_source import MetricsSource

    page = spec.watch.single
    assert isinstance(page, MetricsUrl)
    address = page.url
    try:
        api = ServerApi(address, resolve_api_key(spec.watch.api_key))
    except ValueError as exc:
        return fail(f"--attach: {exc}")
    kv_events = None
    if spec.watch.kv_events is not None:
        try:
            kv_events = KvEventsWatch(spec.watch.kv_events, window=spec.watch.window)
        except ValueError as exc:
            return fail(f"--kv-events: {exc}")
    watch = MetricsWatch(api, window=spec.watch.window, kv_events=kv_events)
    problem = start_watch(spec, collect_less=False)  # no requests kept: the defaults do
    if problem is not None:
        return fail(problem)
    if spec.front.headless:
        try:
            return watch_metrics_headless(watch, spec.watch.scrape_interval)
        finally:
            watch.close()
    source = MetricsSource(watch, interval=spec.watch.scrape_interval, history=spec.limits.history)
    code = run_app(source)
    if not source.alive:
        watch.close()
    notice(f"stopped watching {address}; the log is {log_path}")
    return code


def watch_metrics_headless(watch: MetricsWatch, interval: float, out: TextIO | None = None) -> int:
    """Print :func:`metrics_record` of each scrape, every ``interval`` s, until a signal.

    Exit 0, unless the server never answered (a wrong address, as with ``--attach`` of records
    nobody publishes): a watch that saw nothing at all did not do its job, exit 1."""
    out = sys.stdout if out is None else out
    link = LinkNotices(watch.address)
    hinted = reached = False
    with stop_on_signals() as stop:
        while not stop.is_set():
            began = time.monotonic()
            snapshot = watch.scrape()
            link.on_snapshot(snapshot, ())
            window = snapshot.server
            if window is not None and not hinted:
                hinted = True
                notice(PLUGIN_NOTE)
                for line in window.plugin_hint.splitlines():
                    print(f"  {line}", file=sys.stderr, flush=True)
            if snapshot.engine_state is not EngineState.STARTING:
                reached = True
                try:
                    out.write(json.dumps(metrics_record(snapshot)) + "\n")
                    out.flush()
                except BrokenPipeError:
                    silence(out)
                    return EXIT_BROKEN_PIPE
            stop.wait(max(0.0, interval - (time.monotonic() - began)))
    if not reached:
        return fail(f"stopped watching {watch.address}: no vLLM metrics ever came", EXIT_FAILED)
    notice(f"stopped watching {watch.address}")
    return 0


def metrics_record(snapshot: StepSnapshot) -> dict[str, Any]:
    """One scrape as a JSON object: the server's address and state, its counters now, and
    the window's figures (latencies in seconds, ``null`` where nothing was observed)."""
    counters, window = snapshot.counters, snapshot.server
    interval = snapshot.step_time

    def per_s(count: int) -> float | None:
        return round(count / interval, 1) if interval > 0 else None

    address = snapshot.info.attached
    record: dict[str, Any] = {
        "server": address,
        "time": round(time.time(), 3),
        "state": snapshot.engine_state.value,
        "model": snapshot.info.model.removesuffix(f" @ {address}"),  # the served name
        "running": counters.running,
        "waiting": counters.waiting,
        "kv_cache_usage": round(counters.kv_cache_usage, 4),
        "generation_tokens_per_s": per_s(counters.generation_tokens),
        "prompt_tokens_per_s": per_s(counters.prompt_tokens),
    }
    if snapshot.ranks:
        record["ranks"] = [rank_record(rank) for rank in snapshot.ranks]
    if window is None:
        return record
    record.update(
        waiting_by_reason=dict(window.waiting_by_reason),
        finished_total=window.finished_total,
        window_s=round(window.covered, 1),
        finished=dict(window.finished),
        preemptions=window.preemptions,
        prefix_cache_hit_rate=window.prefix_hit_rate,
        steps_per_s=None if window.steps_per_s is None else round(window.steps_per_s, 1),
    )
    if window.kv_blocks is not None:
        record["kv_blocks"] = kv_record(window.kv_blocks)
    for latency in window.latencies:
        record[f"{latency.name}_s"] = {
            "p50": _rounded(latency.p50),
            "p90": _rounded(latency.p90),
            "p99": _rounded(latency.p99),
            "observed": latency.observed,
        }
    return record


def _rounded(value: float | None) -> float | None:
    """Microseconds are all a bucket-interpolated latency can say."""
    return None if value is None else round(value, 6)
