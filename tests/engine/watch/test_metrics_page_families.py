"""A ``/metrics`` page is parsed for the families stepview reads only, with the same figures.

At 64 servers the fleet's watch spent a third of its time in prometheus_client's parser on 16
pages of ~30 KB, most of whose lines (vLLM's histograms stepview does not show, Python's
collector) it never read; those starved the fleet screen's keys. Now only the lines of
:data:`~stepview.engine.watch.metrics.metrics_page.READ` reach the parser: these tests hold that no
figure changed (each real vLLM page read both ways) and that nothing else is parsed.
"""

from __future__ import annotations

import re

import pytest

from stepview.engine.watch.metrics import metrics_page
from stepview.engine.watch.metrics.metrics_page import READ, MetricsPage, read_lines, read_page
from tests.engine.watch.fake_metrics import capture

PAGES = ("idle", "busy", "after", "dp2-busy")
SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created")


def family(line: str) -> str:
    """The family a page's line belongs to (its HELP/TYPE name, or its sample's, unsuffixed)."""
    if line.startswith("# "):
        name = line.split(" ", 3)[2]
    else:
        name = re.split(r"[{ ]", line, maxsplit=1)[0]
    if name in READ:
        return name
    return next((name[: -len(s)] for s in SUFFIXES if name.endswith(s)), name)


def every_vllm_line(text: str) -> str:
    """What was parsed before: every ``vllm:`` line, read or not."""
    vllm = ("vllm:", "# HELP vllm:", "# TYPE vllm:")
    return "\n".join(line for line in text.splitlines() if line.startswith(vllm)) + "\n"


def figures(page: MetricsPage) -> tuple[object, ...]:
    """Everything stepview reads off a page (through the accessors its watch uses)."""
    return (
        page.model,
        [(page.gauge((n,)), page.counter((n,)), page.histogram((n,))) for n in sorted(READ)],
        page.waiting_by_reason,
        page.finished_by_reason,
        page.ranks,
    )


@pytest.mark.parametrize("name", PAGES)
def test_the_figures_read_are_those_of_the_whole_page(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = capture(name)
    fast = read_page(text)
    monkeypatch.setattr(metrics_page, "read_lines", every_vllm_line)
    whole = read_page(text)
    assert figures(fast) == figures(whole)
    assert fast.gauge(("vllm:num_requests_running",)) is not None  # the page has figures
    assert fast.histogram(("vllm:time_to_first_token_seconds",)) is not None


@pytest.mark.parametrize("name", PAGES)
def test_only_the_families_read_reach_the_parser(name: str) -> None:
    text = capture(name)
    kept = read_lines(text).splitlines()
    kept = [line for line in kept if line]
    assert kept and {family(line) for line in kept} <= READ
    wanted = [line for line in text.splitlines() if family(line) in READ]
    assert kept == wanted  # every line of a family read, in order
    assert len(kept) < len(text.splitlines()) / 2  # most of a real page is not read


def test_a_vllm_page_without_the_families_read_is_still_vllm() -> None:
    page = read_page('# TYPE vllm:future_gauge gauge\nvllm:future_gauge{engine="0"} 1.0\n')
    assert page.gauge(("vllm:num_requests_running",)) is None


@pytest.mark.parametrize("page", ["idle", "dp2-busy"])
@pytest.mark.parametrize("value", ["+Inf", "-Inf", "NaN"])
def test_a_figure_that_is_not_a_number_is_a_page_that_does_not_parse(page: str, value: str) -> None:
    """Found by the fuzzer: ``+Inf`` requests running on one rank of two ended the watch's read
    with an ``OverflowError`` (``int(inf)``) instead of the page's ``ValueError``."""
    text = re.sub(
        r'^(vllm:num_requests_running\{engine="0"[^}]*\}) \S+$',
        rf"\1 {value}",
        capture(page),
        count=1,
        flags=re.MULTILINE,
    )
    assert text != capture(page)
    with pytest.raises(ValueError, match=r"vllm:num_requests_running is .*, not a figure"):
        read_page(text)
