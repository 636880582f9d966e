"""Traces and flight recordings someone sent: read whole, then read as ``--replay`` and
``--export-workload`` read them (every snapshot, the note shown before it, the workload).
Opening raises :class:`TraceError` (not a trace, a newer version); after that, a damaged line
is skipped and said in ``trace.warning``: nothing else may raise."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from stepview.trace.format import TraceError
from stepview.trace.reader import load_trace
from stepview.trace.replay import trace_note
from stepview.trace.store import Trace
from stepview.trace.workload import workload_of
from tests.fuzz.inputs import BYTES, dumps, json_lines, json_samples, mutated
from tests.fuzz.profiles import MAX_INPUT, bounded
from tests.helpers import DATA

TRACE = json_samples((DATA / "replay.trace.jsonl").read_text())
FLIGHT_HEADER = {
    **TRACE[0],
    "flight": {"kind": "stall", "why": "no step for 30 s", "step": 12, "held": 60.0},
}
FLIGHT = [
    FLIGHT_HEADER,
    *TRACE[1:],
    {"k": "flight", "kind": "alert", "why": "queue grows", "step": 14},
    {
        "k": "stacks",
        "kind": "stall",
        "step": 12,
        "cores": [
            {
                "core": "EngineCore_0",
                "taken": 12.5,
                "how": "asked",
                "text": 'Thread 0x7f (most recent call first):\n  File "x.py", line 1 in f\n',
                "names": {"0x7f": "MainThread"},
                "step_thread": "0x7f",
            },
            {"core": "EngineCore_1", "taken": 0, "how": "none", "why_none": "gone"},
        ],
    },
]
ROTATED_HEADER = {**TRACE[0], "part": 2, "previous": ["run.trace.jsonl"]}


def read(data: bytes) -> None:
    """Write ``data`` as a trace file, read it as every reader of a trace does."""
    handle, path = tempfile.mkstemp(suffix=".trace.jsonl")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data[:MAX_INPUT])
        bounded(lambda: use(load_trace(path)), TraceError)
    finally:
        os.unlink(path)


def use(trace: Trace) -> None:
    trace_note(trace.header)
    snapshots = trace.snapshots
    for index in range(len(snapshots)):
        snapshot = snapshots[index]
        snapshot.requests()
    workload_of(trace)


def joined(lines: list[str], cut: int) -> bytes:
    text = "\n".join(lines) + "\n"
    data = text.encode("utf-8", "surrogatepass")
    return data[: len(data) - cut]  # a crash mid-write leaves the last line short


@given(BYTES)
@example(b"[" * 5_000 + b"\n")  # the header: RecursionError escaped opening it
def test_a_trace_of_noise(data: bytes) -> None:
    read(data)


@given(json_lines(TRACE), st.integers(0, 40))
def test_a_trace(lines: list[str], cut: int) -> None:
    read(joined(lines, cut))


@given(json_lines(FLIGHT), st.integers(0, 40))
def test_a_flight_recording(lines: list[str], cut: int) -> None:
    read(joined(lines, cut))


@given(mutated(ROTATED_HEADER) | mutated(FLIGHT_HEADER))
@example({**ROTATED_HEADER, "previous": 5})  # not a list: trace_note iterated it
def test_a_header(header: Any) -> None:
    read(joined([dumps(header), *map(dumps, TRACE[1:4])], 0))
