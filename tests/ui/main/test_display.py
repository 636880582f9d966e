"""Text the panes draw: sanitizing untrusted strings, durations, latencies, states, filters."""

from __future__ import annotations

import pytest

from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import (
    BEHIND,
    KV_CACHE,
    NOT_ADMITTED,
    TOKEN_BUDGET,
    WaitReason,
    unknown_status,
)
from stepview.model.snapshot import RecentStep, RequestState
from stepview.testing.snapshots import RTL_PROMPT, TRICKY_PROMPT, mid_run, request
from stepview.ui.display import (
    NEWLINE_MARK,
    REPLACEMENT,
    id_cell,
    latency_cell,
    multi_line,
    one_line,
    rate,
    rate_value,
    seconds,
    sparkline,
    state_cell,
    state_detail,
    step_throughputs,
    throughput,
    token_repr,
)
from stepview.ui.main.filtering import RequestFilter


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain ascii", "plain ascii"),
        ("a\nb\r\nc", f"a{NEWLINE_MARK}b{NEWLINE_MARK}c"),
        ("tab\there", "tab here"),
        ("esc\x1b[31mred", f"esc{REPLACEMENT}[31mred"),
        ("bell\x07", f"bell{REPLACEMENT}"),
        ("\u202eevil\u202c", "evil"),  # bidi override dropped
        ("zero\u200bwidth", "zerowidth"),
        ("fam👨\u200d👩\u200d👧", "fam👨👩👧"),  # joiners dropped: width is what Rich measures
        ("heart❤\ufe0f", "heart❤"),  # variation selector dropped
        ("line\u2028sep", f"line{NEWLINE_MARK}sep"),
        ("caf\u00e9 日本", "caf\u00e9 日本"),  # printable non-ASCII kept
    ],
)
def test_one_line_makes_text_safe(raw: str, shown: str) -> None:
    assert one_line(raw) == shown


def test_one_line_has_no_control_or_format_characters() -> None:
    import unicodedata

    for raw in (TRICKY_PROMPT, RTL_PROMPT, "".join(chr(c) for c in range(0, 0x3000, 7))):
        out = one_line(raw)
        bad = [c for c in out if unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp", "Cs"}]
        assert not bad, bad


def test_zalgo_is_capped() -> None:
    out = one_line("a" + "\u0301" * 50 + "b")
    assert out == "a\u0301\u0301b"


def test_one_line_limit_bounds_work() -> None:
    assert one_line("x" * 10_000, 20) == "x" * 20


def test_multi_line_keeps_newlines_only() -> None:
    assert multi_line("a\r\nb\x1b\nc") == f"a\nb{REPLACEMENT}\nc"


def test_token_repr_shows_invisible_characters() -> None:
    assert token_repr(" hi", 1) == "' hi'"
    assert token_repr("\n", 2) == "'\\n'"
    assert token_repr("\u202e", 3) == "'\\u202e'"
    assert token_repr(None, 42) == "<42>"


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "-"), (0.0123, "12ms"), (1.234, "1.23s"), (12.34, "12.3s"), (125, "2m05s")],
)
def test_seconds(value: float | None, text: str) -> None:
    assert seconds(value) == text


@pytest.mark.parametrize(
    ("value", "number"),
    [
        (None, "-"),
        (45.24, "45.2"),
        (99.99999, "100"),  # a rate of 1 / 10ms, in floating point
        (338.2, "338"),
        (999.7, "1.0k"),
        (1340.0, "1.3k"),
        (9_970.0, "10k"),
        (123_456.0, "123k"),
    ],
)
def test_rate_fits_four_characters_without_its_unit(value: float | None, number: str) -> None:
    assert rate_value(value) == number
    assert rate(value) == f"{number} tok/s"


def test_the_latency_cell_of_a_finished_request() -> None:
    view = request(
        "r",
        "p",
        RequestState.FINISHED,
        arrival=1.0,
        scheduled=1.5,
        first_token=2.0,
        finished=4.0,
        tokens=9,
        reason="length",
    )
    # TTFT, and 8 tokens after the first in 2 s (tests/model/test_latency.py has the rules).
    assert latency_cell(view, 99.0) == "ttft 1.00s 4.0 tok/s"  # the clock: not once finished


def test_queued_time_grows_with_the_snapshot_clock() -> None:
    view = request("r", "p", RequestState.WAITING, arrival=1.0)
    assert latency_cell(view, 1.25) == "queued 250ms"
    assert latency_cell(view, 3.0) == "queued 2.00s"


def test_state_details() -> None:
    snap = mid_run()
    details = {v.request_id: state_detail(v) for v in snap.requests()}
    assert details == {
        "u9": "pending",
        "u7": "waiting",
        "u4": "preempted x2",
        "u5": "prefill 128/320",
        "u1": "decoding 12 tok",
        "u3": "decoding 18 tok",
        "u2": "length",
        "u6": "stop",
        "u8": "aborted",
        "u10": "rejected",
    }


def test_n2_finish_reasons_are_merged() -> None:
    view = request(
        "r", "p", RequestState.FINISHED, spec=SamplingSpec(n=2), tokens=3, reason="length"
    )
    assert state_detail(view) == "length"


def test_sparkline_scales_and_keeps_width() -> None:
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7], 8, top=7) == "▁▂▃▄▅▆▇█"
    assert sparkline([1.0] * 50, 10) == "█" * 10
    assert sparkline([], 5) == ""
    assert sparkline([0.0, 0.0], 5) == "▁▁"


def test_throughput_from_recent_steps() -> None:
    steps = [
        RecentStep(
            i,
            clock=i * 0.5,
            step_time=0.1,
            running=2,
            waiting=0,
            kv_cache_usage=0.1,
            generation_tokens=4,
        )
        for i in range(5)
    ]
    assert throughput(steps) == pytest.approx(16 / 2.0)
    assert step_throughputs(steps)[1:] == [pytest.approx(8.0)] * 4
    assert throughput(steps[:1]) is None


@pytest.mark.parametrize(
    ("query", "ids"),
    [
        ("", {"u9", "u7", "u4", "u5", "u1", "u3", "u2", "u6", "u8", "u10"}),
        ("is:aborted", {"u8"}),
        ("is:length", {"u2"}),
        ("is:decoding", {"u1", "u3"}),
        ("robot", {"u1"}),
        ("U1", {"u1", "u10"}),
        ("is:finished stop", {"u6"}),
    ],
)
def test_filter(query: str, ids: set[str]) -> None:
    f = RequestFilter.parse(query)
    assert {v.request_id for v in mid_run().requests() if f.matches(v)} == ids


def test_throughput_is_the_last_busy_windows_not_an_average_over_idle_time() -> None:
    """Issue 13: two bursts with an idle minute between them showed "1.4 tok/s"."""

    def burst(first: int, start: float, count: int) -> list[RecentStep]:
        return [RecentStep(first + i, start + i * 0.01, 0.01, 2, 0, 0.1, 4) for i in range(count)]

    steps = [*burst(0, 0.0, 20), *burst(20, 60.0, 11)]
    assert throughput(steps) == pytest.approx(40 / 0.1)  # the second burst alone
    assert throughput(steps[:20]) == pytest.approx(76 / 0.19)
    assert throughput([*steps[:20], *burst(20, 60.0, 1)]) is None  # one step: no rate yet


_BEHIND = WaitReason(BEHIND, "behind load1-12, which vLLM could not schedule", "load1-12")


@pytest.mark.parametrize(
    ("state", "preemptions", "wait", "width", "shown"),
    [
        (RequestState.WAITING, 0, _BEHIND, 17, "waiting·behind"),
        (RequestState.WAITING, 0, _BEHIND, 23, "waiting·behind load1-12"),
        (RequestState.WAITING, 0, _BEHIND, None, "waiting·behind load1-12"),
        (RequestState.PREEMPTED, 2, WaitReason(TOKEN_BUDGET, "spent"), 20, "preempted x2·budget"),
        (RequestState.PREEMPTED, 12, _BEHIND, 17, "preempted·behind"),
        (RequestState.WAITING, 0, WaitReason(KV_CACHE, "3 more blocks"), 17, "waiting·kv"),
        (RequestState.PENDING, 0, WaitReason(NOT_ADMITTED, "in stepview's queue"), 17, "pending"),
        # A vLLM status this stepview does not know: said, with the table's word for it.
        (RequestState.WAITING, 0, unknown_status("WAITING_FOR_X"), 17, "waiting·unknown"),
    ],
)
def test_the_state_cell_keeps_the_wait_reason_whole_within_its_width(
    state: RequestState,
    preemptions: int,
    wait: WaitReason,
    width: int | None,
    shown: str,
) -> None:
    view = request("w1", "p", state, preemptions=preemptions, wait=wait)
    assert state_cell(view, width) == shown
    assert width is None or len(shown) <= width


@pytest.mark.parametrize(
    ("request_id", "width", "shown"),
    [
        ("u12", 6, "u12"),
        ("load1-12", 8, "load1-12"),
        ("load1-12", 6, "…d1-12"),  # a load's rows differ at the end, not the start
        ("a7db916a@1", 8, "…b916a@1"),  # a rank stays visible
        ("line\nbreak", 10, "line⏎break"),
    ],
)
def test_ids_too_long_keep_their_end(request_id: str, width: int, shown: str) -> None:
    assert id_cell(request_id, width) == shown
