"""A request's latency figures, defined once in :mod:`stepview.model.latency`.

Each test pins one rule of the definitions: vLLM's arithmetic for n = 1, what n > 1 samples
count, what a request that never got somewhere has, how an in-flight request is measured
against the snapshot clock, and that out-of-order times never give a negative figure.
"""

from __future__ import annotations

import pytest

from stepview.model.latency import request_latency
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState, RequestView
from stepview.testing.snapshots import completion, request


def _finished(tokens: int, **times: float) -> RequestView:
    timings = {"arrival": 1.0, "scheduled": 1.5, "first_token": 2.0, "finished": 4.0} | times
    return request("r", "p", RequestState.FINISHED, tokens=tokens, reason="length", **timings)


def test_a_finished_request_has_vllms_figures() -> None:
    lat = request_latency(_finished(9))
    assert lat.request_id == "r"
    assert lat.queue == pytest.approx(0.5)  # queued_time
    assert lat.ttft == pytest.approx(1.0)  # queued_time + prefill_time
    assert lat.e2e == pytest.approx(3.0)  # e2e_latency
    # mean_time_per_output_token: decode time over the tokens after the first.
    assert lat.itl == pytest.approx(2.0 / 8)
    # The tokens after the first over first token to finished: 1 / ITL for one sample,
    # not 9 tokens over scheduled to finished (2.5 s), which would count the prefill.
    assert lat.decode_rate == pytest.approx(8 / 2.0)
    assert lat.decode_rate == pytest.approx(1 / lat.itl)


def test_the_clock_does_not_matter_once_finished() -> None:
    view = _finished(9)
    assert request_latency(view, now=99.0) == request_latency(view)


def test_one_token_has_no_inter_token_latency_nor_decode_rate() -> None:
    lat = request_latency(_finished(1))
    assert lat.itl is None and lat.decode_rate is None
    assert lat.ttft == pytest.approx(1.0) and lat.e2e == pytest.approx(3.0)


def test_no_tokens_at_all() -> None:
    lat = request_latency(
        request("r", "p", RequestState.ABORTED, arrival=1.0, scheduled=1.5, finished=2.0)
    )
    assert (lat.ttft, lat.itl, lat.decode_rate) == (None, None, None)
    assert lat.queue == pytest.approx(0.5) and lat.e2e == pytest.approx(1.0)


def test_never_scheduled() -> None:
    rejected = request("r", "p", RequestState.REJECTED, arrival=10.0, finished=10.0)
    lat = request_latency(rejected, now=12.0)  # done: the clock does not make it wait on
    assert (lat.queue, lat.ttft, lat.itl, lat.decode_rate) == (None, None, None, None)
    assert lat.e2e == 0.0
    waiting = request("w", "p", RequestState.WAITING, arrival=1.0)
    assert request_latency(waiting).queue is None  # records, CSV: not reached yet
    assert request_latency(waiting, now=3.0).queue == pytest.approx(2.0)  # the panes
    assert request_latency(waiting, now=3.0).e2e is None


def test_a_decoding_request_is_measured_to_the_snapshot_clock() -> None:
    view = request(
        "r", "p", RequestState.DECODING, arrival=1.0, scheduled=1.5, first_token=2.0, tokens=5
    )
    assert request_latency(view).decode_rate is None
    lat = request_latency(view, now=3.0)
    assert lat.queue == pytest.approx(0.5)  # scheduled: it stopped growing
    assert lat.decode_rate == pytest.approx(4 / 1.0)
    assert lat.itl == pytest.approx(1.0 / 4)
    assert lat.e2e is None
    assert request_latency(view, now=2.0).decode_rate is None  # no time yet: no rate


def test_n_samples_count_the_tokens_after_each_first_and_the_longest_for_itl() -> None:
    view = _finished(0)._replace(
        spec=SamplingSpec(n=2), completions=(completion(0, 9), completion(1, 5))
    )
    lat = request_latency(view)
    # 8 + 4 tokens after the two first ones, over the 2 s of decoding.
    assert lat.decode_rate == pytest.approx(12 / 2.0)
    # The longest sample decoded from the first token to the end: 8 gaps in 2 s.
    assert lat.itl == pytest.approx(2.0 / 8)


def test_a_sample_without_tokens_yet_is_not_counted() -> None:
    view = _finished(0)._replace(
        spec=SamplingSpec(n=2), completions=(completion(0, 3), completion(1, 0))
    )
    assert request_latency(view).decode_rate == pytest.approx(2 / 2.0)


def test_spans_out_of_order_are_clamped_at_zero() -> None:
    lat = request_latency(_finished(5, arrival=3.0, scheduled=2.5, first_token=4.5))
    assert lat.queue == 0.0  # scheduled before it arrived
    assert lat.ttft == pytest.approx(1.5)
    assert lat.e2e == pytest.approx(1.0)
    # Finished before the first token: no time decoding, so no rate, and no gap between tokens.
    assert lat.itl == 0.0
    assert lat.decode_rate is None
