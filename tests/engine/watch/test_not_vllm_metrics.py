"""``--attach http://HOST:PORT`` pointed at a port whose ``/metrics`` is not vLLM's (issue 31).

Before, a page with no ``vllm:`` series read as an idle vLLM server with no model: the watch
said "watching" and advised restarting "the server" with stepview's plug-in. Now the watch
stays at connecting, says once what it found there, and keeps trying in case vLLM starts on
that port later (the fake serves the page; the pages are real programs' where one is at hand).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector

from stepview.engine.watch.api.server_api import ServerApi
from stepview.engine.watch.metrics.metrics_page import NotVllmMetrics, read_page, what_is_there
from stepview.engine.watch.metrics.metrics_watch import MetricsWatch
from stepview.metrics.families import StepviewMetrics
from stepview.model.snapshot import EngineState
from tests.engine.watch.fake_metrics import FakeMetrics, capture

HTML = "<!DOCTYPE html>\n<html><head><title>Grafana</title></head><body>...</body></html>\n"


def python_program_page(own: bool = False) -> str:
    """What a Python service with prometheus_client serves: its GC and platform, and (``own``)
    a metric of its own, whose name says nothing known."""
    registry = CollectorRegistry()
    GCCollector(registry=registry)
    PlatformCollector(registry=registry)
    if own:
        Counter("http_requests", "Requests served", registry=registry).inc()
    return generate_latest(registry).decode()


def test_what_is_there_is_said_in_words() -> None:
    stepview_page = generate_latest(StepviewMetrics(process=False).registry).decode()
    assert what_is_there(HTML) == "not Prometheus text (an HTML page)"
    assert what_is_there('{"status": "ok"}') == "not Prometheus text (JSON)"
    assert what_is_there("") == "an empty page"
    assert what_is_there("this is { not metrics\n") == "not Prometheus text"
    assert what_is_there(stepview_page) == (
        "Prometheus text with no vLLM series (it looks like stepview's own exporter "
        "(--metrics-port), not the vLLM server it watches)"
    )
    assert what_is_there(python_program_page()) == (
        "Prometheus text with no vLLM series (it looks like a Python program)"
    )
    node = "# TYPE node_load1 gauge\nnode_load1 0.5\n# TYPE go_goroutines gauge\ngo_goroutines 7\n"
    assert (
        what_is_there(node) == "Prometheus text with no vLLM series (it looks like node_exporter)"
    )


def test_a_page_without_vllm_series_is_refused_and_vllms_is_read() -> None:
    for page in (HTML, python_program_page()):
        try:
            read_page(page)
        except NotVllmMetrics as exc:
            assert str(exc) == what_is_there(page)
        else:
            raise AssertionError("a page with no vLLM series was read as vLLM's")
    assert read_page(capture("idle")).model  # a real vLLM page: its model named


def test_the_watch_says_what_it_found_and_follows_vllm_when_it_comes(
    fake_metrics: FakeMetrics,
) -> None:
    fake_metrics.page = HTML
    watch = MetricsWatch(ServerApi(fake_metrics.url))
    first, again = watch.scrape(), watch.scrape()
    for snapshot in (first, again):  # still connecting: no "watching", no restart advice
        assert snapshot.engine_state is EngineState.STARTING and snapshot.server is None
    assert first.phase == (
        f"connecting to {fake_metrics.url}: its /metrics is not Prometheus text (an HTML page); "
        "trying again"
    )
    assert again.phase == first.phase  # the same words: said once by the watch's notices
    fake_metrics.page = capture("idle")  # vLLM came up on that port
    reached = watch.scrape()
    assert reached.engine_state is EngineState.IDLE and reached.server is not None
