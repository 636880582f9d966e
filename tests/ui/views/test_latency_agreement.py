"""One request, one speed: the panes, the detail view, the latency panel and the exports agree.

The requests here are chosen so the definitions each place once had apart would disagree
(a long queue and prefill before a short decode; two samples of different lengths), and the
test reads what each place draws or writes, so a figure worked out anew anywhere fails it.
"""

from __future__ import annotations

import pytest

from stepview.files.csv_export import COLUMNS, csv_row
from stepview.files.records import request_record
from stepview.insight.percentiles import LatencyStats
from stepview.model.latency import request_latency
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState, RequestView
from stepview.testing.snapshots import completion, request
from stepview.ui.detail.screen import describe
from stepview.ui.display import latency_cell, rate_value, seconds
from stepview.ui.views.latency_view import LABELS, latency_table

# 0.8 s queued, 1.2 s of prefill, then 31 more tokens in 1 s: 31.0 tok/s decoding, where
# 32 tokens over scheduled to finished (2.2 s) would read 14.5 tok/s.
SLOW_PREFILL = request(
    "slow-prefill",
    "p",
    RequestState.FINISHED,
    arrival=1.0,
    scheduled=1.8,
    first_token=3.0,
    finished=4.0,
    tokens=32,
    reason="length",
)
# Two samples, 20 and 8 tokens, decoding for 0.5 s: 26 tokens after the two first ones.
TWO_SAMPLES = SLOW_PREFILL._replace(
    request_id="two-samples",
    spec=SamplingSpec(n=2),
    timings=SLOW_PREFILL.timings._replace(finished=3.5),
    completions=(completion(0, 20, reason="length"), completion(1, 8, reason="stop")),
)
FINISHED = [pytest.param(SLOW_PREFILL, id="slow-prefill"), pytest.param(TWO_SAMPLES, id="n2")]


def _panel_row(view: RequestView, metric: str) -> set[str]:
    """The cells of ``metric``'s row in the latency panel with ``view`` its only request."""
    summary = LatencyStats.of([view]).summary()
    for line in latency_table(summary, "ttft").plain.splitlines():
        label, _, cells = line.strip(" ▶").partition("  ")
        if label == LABELS[metric]:
            return set(cells.split())
    raise AssertionError(f"no row {LABELS[metric]!r} in the panel")


@pytest.mark.parametrize("view", FINISHED)
def test_the_pane_the_detail_and_the_panel_show_one_speed(view: RequestView) -> None:
    lat = request_latency(view)
    assert lat.decode_rate is not None and lat.ttft is not None
    speed, ttft = rate_value(lat.decode_rate), seconds(lat.ttft)
    assert latency_cell(view, now=99.0) == f"ttft {ttft} {speed} tok/s"
    detail = describe(view, now=99.0).plain
    assert f"decode {speed} tok/s" in detail and f"TTFT {ttft}" in detail
    assert _panel_row(view, "decode_rate") == {speed}
    assert _panel_row(view, "ttft") == {ttft}
    assert _panel_row(view, "queue") == {seconds(lat.queue)}
    assert _panel_row(view, "e2e") == {seconds(lat.e2e)}


def test_the_speed_is_the_decode_rate() -> None:
    """What the one figure is: a guard against "unifying" on another definition."""
    assert latency_cell(SLOW_PREFILL, now=99.0) == "ttft 2.00s 31.0 tok/s"
    assert latency_cell(TWO_SAMPLES, now=99.0) == "ttft 2.00s 52.0 tok/s"
    assert _panel_row(TWO_SAMPLES, "itl") == {seconds(0.5 / 19)}  # the longer sample's gaps


@pytest.mark.parametrize("view", FINISHED)
def test_the_exports_write_the_figures_the_panel_counts(view: RequestView) -> None:
    lat = request_latency(view)
    timings = request_record(view)["timings"]
    row = dict(zip(COLUMNS, csv_row(request_record(view)), strict=True))
    for column, metric, value in (
        ("queue_time", "queue", lat.queue),
        ("ttft", "ttft", lat.ttft),
        ("e2e", "e2e", lat.e2e),
    ):
        assert value is not None
        assert timings[column] == round(value, 6)
        assert row[column] == f"{value:.6f}"
        assert _panel_row(view, metric) == {seconds(value)}


def test_a_request_in_flight_reads_the_same_in_its_row_and_its_detail() -> None:
    decoding = request(
        "live",
        "p",
        RequestState.DECODING,
        arrival=1.0,
        scheduled=1.8,
        first_token=3.0,
        tokens=11,
    )
    assert latency_cell(decoding, now=5.0) == "ttft 2.00s 5.0 tok/s"
    assert "decode 5.0 tok/s" in describe(decoding, now=5.0).plain
    waiting = request("wait", "p", RequestState.WAITING, arrival=1.0)
    assert latency_cell(waiting, now=1.25) == "queued 250ms"
    assert "queued 250ms" in describe(waiting, now=1.25).plain
