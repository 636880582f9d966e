"""``--attach prometheus://``: which of Prometheus' active targets are the fleet, read from a
real Prometheus 2.42 answer and asked of a fake one shaped the same; what a Prometheus that
cannot be reached, or is not Prometheus, says."""

from __future__ import annotations

import json

import pytest

from stepview.engine.watch.fleet.prometheus_targets import (
    PrometheusError,
    PrometheusFinder,
    active_targets,
    vllm_instances,
    watched_address,
)
from stepview.model.address import MetricsUrl, prometheus_discovery
from stepview.model.targets import PROMETHEUS, Discovery, Target
from stepview.testing.vllm_server import free_port
from tests.engine.watch.fake_metrics import FakeMetrics
from tests.engine.watch.fake_prometheus import SERIES, FakePrometheus, Listed, captured

VLLM_LABELS = (("instance", "127.0.0.1:18001"), ("job", "vllm"), ("model", "tiny"), ("zone", "a"))


def test_a_jobs_targets_from_a_real_answer_up_or_down_with_their_labels() -> None:
    """The capture lists a file_sd job of three (one up, two down, one under a path prefix)
    and Prometheus itself."""
    targets, skipped = active_targets(captured(), ("vllm",), None, "p")
    assert [t.address for t in targets] == [
        "http://127.0.0.1:18003/sub",
        "http://127.0.0.1:18001",
        "http://127.0.0.1:18002",
    ]
    assert targets[1] == Target(MetricsUrl("http://127.0.0.1:18001"), VLLM_LABELS, "p")
    assert dict(targets[0].labels) == {"instance": "127.0.0.1:18003", "job": "vllm"}
    assert skipped == []
    everyone, _ = active_targets(captured(), (), None, "p")
    assert "http://127.0.0.1:19090" in [t.address for t in everyone]  # Prometheus' own page


def test_without_a_job_only_targets_with_vllms_series_are_taken() -> None:
    """The real /api/v1/series answer: 18001 (up, serving a vLLM capture) has the series."""
    instances = vllm_instances(json.loads(SERIES.read_text()))
    assert instances == {("vllm", "127.0.0.1:18001")}
    targets, _ = active_targets(captured(), (), instances, "p")
    assert [t.address for t in targets] == ["http://127.0.0.1:18001"]


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("http://h:8000/metrics", "http://h:8000"),
        ("https://h:8443/vllm-a/metrics?x=1", "https://h:8443/vllm-a"),
        ("http://[::1]:8000/metrics", "http://[::1]:8000"),
        ("http://h:9100/probe", None),  # a blackbox exporter's: nothing to watch
        ("", None),
    ],
)
def test_a_scrape_url_is_watched_at_its_servers_address(url: str, address: str | None) -> None:
    assert watched_address(url) == address


def test_not_prometheus_answers_say_so() -> None:
    with pytest.raises(PrometheusError, match="did not answer as Prometheus does"):
        active_targets({"detail": "Not Found"}, (), None, "p")
    with pytest.raises(PrometheusError, match="did not answer as Prometheus does"):
        active_targets([], (), None, "p")


def test_the_finder_asks_a_prometheus_for_its_vllm_targets(
    fake_prometheus: FakePrometheus,
) -> None:
    a, b, node = (
        "http://10.0.0.1:8000/metrics",
        "http://10.0.0.2:8000/metrics",
        "http://n:9100/metrics",
    )
    fake_prometheus.targets = [
        Listed(a, labels={"zone": "a"}),
        Listed(b, labels={"zone": "b"}, health="down"),
        Listed(node, job="node"),
    ]
    fake_prometheus.vllm = {a, b}
    finder = PrometheusFinder(prometheus_discovery(fake_prometheus.address))
    found = finder.poll()
    assert [(t.address, dict(t.labels)["zone"]) for t in found] == [
        ("http://10.0.0.1:8000", "a"),
        ("http://10.0.0.2:8000", "b"),
    ]
    assert found[0].listed_by == fake_prometheus.address
    assert any(
        p.startswith("/api/v1/series?match%5B%5D=vllm%3Anum_requests_running")
        for p in fake_prometheus.asked
    )
    # A job named: its targets, vLLM's series or not; nothing else asked.
    fake_prometheus.asked.clear()
    node_only = PrometheusFinder(prometheus_discovery(f"{fake_prometheus.address}?job=node"))
    assert [t.address for t in node_only.poll()] == ["http://n:9100"]
    assert fake_prometheus.asked == ["/api/v1/targets?state=active"]


def test_a_prometheus_that_cannot_be_reached_says_so() -> None:
    port = free_port()  # nothing listens there
    finder = PrometheusFinder(
        Discovery(PROMETHEUS, f"http://127.0.0.1:{port}", f"prometheus://127.0.0.1:{port}")
    )
    with pytest.raises(PrometheusError) as raised:
        finder.poll()
    assert (
        str(raised.value) == f"prometheus://127.0.0.1:{port}: cannot reach it (connection refused)"
    )


def test_a_vllm_server_given_as_prometheus_says_it_is_not(fake_metrics: FakeMetrics) -> None:
    name = f"prometheus://127.0.0.1:{fake_metrics.port}"
    finder = PrometheusFinder(prometheus_discovery(name))
    with pytest.raises(PrometheusError) as raised:
        finder.poll()
    assert str(raised.value) == (
        f"{name}: /api/v1/targets answered Not Found (is this Prometheus' address?)"
    )


def test_check_says_which_servers_a_prometheus_lists(fake_prometheus: FakePrometheus) -> None:
    from stepview.launch.check import answers

    fake_prometheus.targets = [Listed("http://10.0.0.1:8000/metrics")]
    fake_prometheus.vllm = {"http://10.0.0.1:8000/metrics"}
    assert answers(fake_prometheus.address) == (
        "Prometheus lists 1 vLLM servers: http://10.0.0.1:8000",
        True,
    )
    fake_prometheus.vllm = set()
    assert answers(fake_prometheus.address) == (
        "Prometheus answers, but lists no vLLM server there now",
        False,
    )
