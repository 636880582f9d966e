"""A ``/metrics`` page's samples: the lean reader reads vLLM's pages, as the parser does.

prometheus_client's parser took 3 ms for the lines stepview reads off a page; a fleet of a
thousand servers has a couple of hundred pages a second to read. vLLM's pages are plain text
that a regular expression a line reads in a fraction of that: these tests hold that every
captured page is read that way (not handed to the parser), with the parser's very samples,
and that text which is not plain (escapes, timestamps) is still read, by the parser.
``tests/fuzz/test_fuzz_watch.py`` holds the two equal on mutated pages.
"""

from __future__ import annotations

import pytest

from stepview.engine.watch.metrics.metrics_page import read_lines, read_page
from stepview.engine.watch.metrics.page_samples import (
    PageSample,
    page_samples,
    parsed_samples,
    plain_samples,
)
from tests.engine.watch.fake_metrics import capture

PAGES = ("idle", "busy", "after", "dp2-busy")


@pytest.mark.parametrize("name", PAGES)
def test_a_vllm_page_is_read_by_the_lean_reader_as_the_parser_reads_it(name: str) -> None:
    lines = read_lines(capture(name))
    lean = plain_samples(lines)
    assert lean is not None  # plain: the parser is not needed
    assert lean == parsed_samples(lines)
    assert len(lean) > 100


def test_families_are_those_of_the_parser() -> None:
    lines = (
        "# HELP vllm:num_preemptions_total Preemptions.\n"
        "# TYPE vllm:num_preemptions_total counter\n"
        'vllm:num_preemptions_total{engine="0"} 3.0\n'
        "# TYPE vllm:prompt_tokens counter\n"  # a counter named without _total
        "vllm:prompt_tokens 7\n"
        "# TYPE vllm:e2e_request_latency_seconds histogram\n"
        'vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 2.0\n'
        "vllm:e2e_request_latency_seconds_created 1.7e9\n"  # not the histogram's: its own
        "vllm:num_requests_waiting NaN\n"  # announced by no TYPE: untyped
    )
    lean = plain_samples(lines)
    assert lean is not None
    assert [s[:3] for s in lean] == [(s.family, s.kind, s.name) for s in parsed_samples(lines)]
    assert lean[:2] == [
        PageSample("vllm:num_preemptions", "counter", "vllm:num_preemptions_total",
                   {"engine": "0"}, 3.0),
        PageSample("vllm:prompt_tokens", "counter", "vllm:prompt_tokens_total", {}, 7),
    ]  # fmt: skip
    assert lean[-1].kind == "unknown"


@pytest.mark.parametrize(
    ("line", "labels"),
    [
        ('vllm:num_requests_running{model_name="a\\"b"} 1', {"model_name": 'a"b'}),
        ('vllm:num_requests_running{model_name="m"} 1 1700000000000', {"model_name": "m"}),
        ('vllm:num_requests_running{ model_name="m" } 1', {"model_name": "m"}),
    ],
)
def test_text_that_is_not_plain_is_read_by_the_parser(line: str, labels: dict[str, str]) -> None:
    lines = f"# TYPE vllm:num_requests_running gauge\n{line}\n"
    assert plain_samples(lines) is None
    assert page_samples(lines) == [
        PageSample("vllm:num_requests_running", "gauge", "vllm:num_requests_running", labels, 1)
    ]


@pytest.mark.parametrize(
    "line",
    [
        'vllm:num_requests_running{engine="0",engine="1"} 1',  # a label twice
        'vllm:num_requests_running{__name__="x"} 1',  # a reserved label
        "vllm:num_requests_running 1_000",
    ],
)
def test_what_the_parser_refuses_is_refused(line: str) -> None:
    with pytest.raises(ValueError):
        read_page(f"# TYPE vllm:num_requests_running gauge\n{line}\n")


@pytest.mark.parametrize("value", ["7", "-7", "+7", "7.0", "1e3", "+Inf", "NaN", "9" * 5_000])
def test_a_value_is_the_parsers(value: str) -> None:
    """An integer stays one, as the parser reads it; digits too many for ``int()`` are a
    float's."""
    lines = f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running {value}\n"
    lean, exact = plain_samples(lines), parsed_samples(lines)
    assert lean is not None
    assert repr(lean[0].value) == repr(exact[0].value)
    assert type(lean[0].value) is type(exact[0].value)
