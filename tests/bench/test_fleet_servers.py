"""The simulated fleet's ``/metrics`` page is prometheus_client's, written faster.

``fleet_scale`` at a thousand servers reads ~190 pages a second; ``generate_latest`` took 3 ms
a page in the simulated fleet's one process, a core that its plug-in servers' steps then
lacked (they stepped at half their pace). The page is now prometheus_client's text split once
around its values: this holds it equal to ``generate_latest`` as the figures move.
"""

from __future__ import annotations

from collections.abc import Iterator

import prometheus_client
import pytest
from prometheus_client import generate_latest

from benchmarks.fleet_servers import MetricsPage


@pytest.fixture(autouse=True)
def no_created_series() -> Iterator[None]:
    """As vLLM's (and the simulated fleet's) pages; prometheus_client's default after."""
    was = prometheus_client.metrics._use_created
    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
    yield
    prometheus_client.metrics._use_created = was


@pytest.mark.parametrize("index", [0, 5])
def test_the_page_is_prometheus_clients_as_its_figures_move(index: int) -> None:
    page = MetricsPage(index, seed=index)
    for _ in range(40):
        page.tick(0.5)
        assert page.page() == generate_latest(page.registry)
    assert b"vllm:time_to_first_token_seconds_bucket" in page.page()
