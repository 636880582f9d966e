"""What a watch reads from servers: a ``/metrics`` page, Prometheus' targets and series
answers, the plug-in's records (msgpack, then read into entries as the watch reads them),
vLLM's KV-cache events and the plug-in's stacks. Each returns its value or raises the one
error its caller catches: ``ValueError`` (a page, a KV event message), :class:`PrometheusError`,
``msgspec.DecodeError`` (records, stacks)."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import msgspec
from hypothesis import assume, example, given
from hypothesis import strategies as st

from stepview.engine.records.entries import EntryReader, merge_many
from stepview.engine.records.facts import EndedFacts, decode_batch
from stepview.engine.records.stacks import decode_stacks
from stepview.engine.watch.api.server_api import ApiError, ServerApi
from stepview.engine.watch.fleet.prometheus_targets import (
    PrometheusError,
    active_targets,
    vllm_instances,
)
from stepview.engine.watch.metrics.kv_event_wire import decode_message
from stepview.engine.watch.metrics.metrics_page import read_lines, read_page
from stepview.engine.watch.metrics.page_samples import PageSample, parsed_samples, plain_samples
from tests.engine.watch.attach_helpers import PREEMPTED, WAITING, record, request
from tests.engine.watch.fake_metrics import capture
from tests.fuzz.inputs import BYTES, SCALARS, TEXT, WORDS, mutated
from tests.fuzz.profiles import MAX_INPUT, bounded
from tests.helpers import DATA

# -- /metrics --------------------------------------------------------------------------------

PAGES = [capture(name) for name in ("idle", "busy", "dp2-busy")]


@st.composite
def pages(draw: st.DrawFn) -> str:
    """A captured page with some lines changed: a number, a label, a line dropped or noise."""
    lines = draw(st.sampled_from(PAGES)).splitlines()
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, len(lines) - 1))
        choice = draw(st.integers(0, 4))
        if choice == 0:
            del lines[at]
        elif choice == 1:
            lines[at] = draw(st.text(max_size=80))
        elif choice == 2:  # the value
            name, _, _ = lines[at].rpartition(" ")
            lines[at] = f"{name} {draw(st.sampled_from(['NaN', '+Inf', '-1', '1e999', 'x']))}"
        elif choice == 3:  # a label's value
            value = json.dumps(draw(st.text(max_size=12) | WORDS))
            lines[at] = lines[at].replace('"', value, 1)
        else:
            lines.insert(at, lines[at])
    return "\n".join(lines)[:MAX_INPUT]


# What makes a plain line not plain (the lean reader must hand it to the parser, or read it
# as the parser does): a space, a backslash, quotes, braces, a timestamp, a reserved or
# repeated label, another type, a counter's suffix.
KINKS = [" ", "  ", "\t", "\\", '\\"', '"', ",", "{", "}", "=", " 1700000000000", "_total",
         "_bucket", "#", '__name__="x",', 'engine="1",', "untyped", "summary", "\r",
         "\xa0"]  # fmt: skip


@st.composite
def kinked_pages(draw: st.DrawFn) -> str:
    """A captured page's lines read (those of the families stepview reads) with a few kinks:
    a character or token inserted anywhere, a line moved, a TYPE line's type changed."""
    lines = read_lines(draw(st.sampled_from(PAGES))).splitlines()
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(lines) - 1))
        line, choice = lines[at], draw(st.integers(0, 2))
        if choice == 0:
            where = draw(st.integers(0, len(line)))
            lines[at] = line[:where] + draw(st.sampled_from(KINKS) | WORDS) + line[where:]
        elif choice == 1:
            lines.insert(draw(st.integers(0, len(lines) - 1)), lines.pop(at))
        elif line.startswith("# TYPE "):
            kind = st.sampled_from(["counter", "gauge", "histogram", "summary", "untyped"])
            lines[at] = line.rpartition(" ")[0] + " " + draw(kind)
    return "\n".join(lines) + "\n"


def same(a: list[PageSample], b: list[PageSample]) -> bool:
    """The same samples (a NaN equal to a NaN)."""
    return len(a) == len(b) and all(
        x[:4] == y[:4] and (x.value == y.value or (math.isnan(x.value) and math.isnan(y.value)))
        for x, y in zip(a, b, strict=True)
    )


@given(TEXT | pages())
def test_a_metrics_page(text: str) -> None:
    bounded(lambda: read_page(text), ValueError)


@given(TEXT | pages() | kinked_pages())
def test_the_lean_reader_reads_as_the_parser_does(text: str) -> None:
    """Where the lean reader reads the lines at all, its samples are the parser's; where the
    parser finds them broken, the lean reader does not read them."""
    lines = read_lines(text)
    lean = bounded(lambda: plain_samples(lines))
    try:
        exact = parsed_samples(lines)
    except ValueError:
        assert lean is None
        return
    assert lean is None or same(lean, exact)


# -- Prometheus' HTTP API ----------------------------------------------------------------------

TARGETS = json.loads((DATA / "prometheus" / "targets-2.42.json").read_text())
SERIES = json.loads((DATA / "prometheus" / "series-2.42.json").read_text())
INSTANCES = {("vllm", "127.0.0.1:8000"), ("prometheus", "localhost:9090")}


BAD_URL = copy.deepcopy(TARGETS)
BAD_URL["data"]["activeTargets"][0]["scrapeUrl"] = "http://[127.0.0.1:8000/metrics"


@given(mutated(TARGETS), st.sampled_from([(), ("vllm",)]), st.sampled_from([None, INSTANCES]))
@example(BAD_URL, (), None)  # urlsplit's ValueError ("Invalid IPv6 URL") escaped
def test_prometheus_targets(
    answer: Any, jobs: tuple[str, ...], instances: set[tuple[str, str]] | None
) -> None:
    bounded(lambda: active_targets(answer, jobs, instances, "prometheus://p"), PrometheusError)


@given(mutated(SERIES))
def test_prometheus_series(answer: Any) -> None:
    bounded(lambda: vllm_instances(answer), PrometheusError)


# -- the plug-in's records ---------------------------------------------------------------------

RECORDS = [
    record(1, request("a-0123abcd", outputs=1, new=[7]), request("b-0123abcd", WAITING)),
    record(
        2,
        request("a-0123abcd", outputs=2, new=[8], intro=False),
        request("b-0123abcd", PREEMPTED, preemptions=1, intro=False),
        full=False,
        head="b-0123abcd",
    ),
    record(
        3,
        idle=True,
        finished=["a-0123abcd"],
        ended=[EndedFacts("a-0123abcd", 3, [7, 8, 6], "length")],
        full=False,
    ),
]
WIRE = msgspec.msgpack.decode(msgspec.msgpack.encode(RECORDS))
"""The records as plain msgpack values (lists), to change anywhere."""


def read_records(payload: bytes) -> None:
    def read() -> None:
        records = decode_batch(payload)
        reader = EntryReader(lambda core_id: core_id.rpartition("-")[0] or None)
        for facts in records:
            reader.read(facts)
        if records:
            merge_many(records)

    bounded(read, msgspec.DecodeError)


@given(BYTES)
def test_records_of_noise(payload: bytes) -> None:
    read_records(payload)


@given(mutated(copy.deepcopy(WIRE)))
def test_records(wire: Any) -> None:
    try:
        payload = msgspec.msgpack.encode(wire)
    except (OverflowError, TypeError, UnicodeEncodeError):
        assume(False)  # a value msgpack cannot carry: no server could send it
    read_records(payload)


@given(st.lists(BYTES, min_size=3, max_size=3) | st.lists(BYTES, max_size=4))
def test_kv_events(frames: list[bytes]) -> None:
    bounded(lambda: decode_message(frames), ValueError)


@given(st.lists(SCALARS | st.lists(SCALARS, max_size=3), max_size=8))
def test_kv_events_shaped(batch: list[Any]) -> None:
    try:
        payload = msgspec.msgpack.encode(batch)
    except (OverflowError, TypeError, UnicodeEncodeError):
        assume(False)
    bounded(lambda: decode_message([b"kv", (1).to_bytes(8, "big"), payload]), ValueError)


@given(BYTES)
def test_stacks(message: bytes) -> None:
    bounded(lambda: decode_stacks(message), msgspec.DecodeError)


# -- the server's (or Prometheus') JSON answers -------------------------------------------------


class _Answer:
    """What ``http.client`` hands back, holding ``body`` with ``status``."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.reason, self._body = status, "Reason", body

    def read(self, amount: int | None = None) -> bytes:
        return self._body if amount is None else self._body[:amount]


class _Connection:
    """A connection whose one call is answered with ``answer``."""

    def __init__(self, answer: _Answer) -> None:
        self.answer = answer

    def request(self, *args: Any, **kwargs: Any) -> None:
        pass

    def getresponse(self) -> _Answer:
        return self.answer

    def close(self) -> None:
        pass


@given(st.sampled_from([200, 400, 404, 500]), BYTES)
@example(200, b"[" * 5_000)  # RecursionError escaped: the watch's (or discovery's) thread died
@example(500, b'{"error": ' + b"[" * 5_000 + b"}")
def test_a_json_answer(status: int, body: bytes) -> None:
    api = ServerApi("http://127.0.0.1:1")
    connection: Any = _Connection(_Answer(status, body))
    bounded(lambda: api._call(connection, "GET", "/v1/models"), ApiError)
