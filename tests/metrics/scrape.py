"""Scraping a running stepview's metrics as Prometheus would: over HTTP, parsed by
``prometheus_client``'s own parser."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from tests.engine.watch.attach_helpers import wait_until

# (name, labels) -> value
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=5) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def waiting(samples: Samples) -> dict[str, float]:
    """``stepview_waiting_requests`` of rank 0 by reason, those above 0."""
    out = {}
    for (name, labels), count in samples.items():
        found = dict(labels)
        if name == "stepview_waiting_requests" and found["rank"] == "0" and count:
            out[found["reason"]] = count
    return out


def scraped_until(url: str, condition: Callable[[Samples], bool], timeout: float = 15.0) -> Samples:
    """Scrape until ``condition`` holds (the watch reads each record a moment after it is
    sent); the last scrape."""
    last: list[Samples] = []

    def holds() -> bool:
        last[:] = [scrape(url)]
        return condition(last[0])

    try:
        wait_until(holds, timeout=timeout)
    except AssertionError:  # say what the last scrape had
        mine = {key: v for key, v in last[0].items() if key[0].startswith("stepview_")}
        raise AssertionError(f"not met in {timeout:.0f} s; the last scrape: {mine}") from None
    return last[0]


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when the scrape has none)."""
    return samples.get((name, frozenset(labels.items())), 0.0)
