"""Files that are not traces fail clearly; damaged traces say where, skip the damaged lines
and play the rest (a truncated last line ends them)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from stepview.engine.driver.loop import Driver
from stepview.trace.format import TRACE_VERSION, TraceError
from stepview.trace.reader import load_trace
from stepview.trace.replay import ReplaySource
from tests.trace.compare import assert_same_run
from tests.trace.runs import add, record, run_to_end


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Driver, list[bytes]]:
    def three(driver: Driver) -> None:
        for i in range(3):
            add(driver, f"r{i}", "hello " * (i + 1), max_tokens=6 + i, logprobs=1)
        run_to_end(driver, 3)

    driver, path, _ = record(tmp_path_factory.mktemp("run"), three)
    return driver, path.read_bytes().splitlines(keepends=True)


def _write(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def _step_lines_before(lines: list[bytes], end: int) -> int:
    return sum(1 for line in lines[1:end] if json.loads(line)["k"] == "step")


def test_truncated_last_line_keeps_everything_before(
    tmp_path: Path, recorded: tuple[Driver, list[bytes]]
) -> None:
    driver, lines = recorded
    cut = len(lines) // 2
    path = _write(tmp_path, [*lines[:cut], lines[cut][: len(lines[cut]) // 2]])
    trace = load_trace(path)
    loaded = _step_lines_before(lines, cut)
    assert trace.warning is not None
    assert trace.warning.startswith(f"line {cut + 1} is truncated; loaded {loaded} snapshots")
    assert_same_run(driver.history()[:loaded], trace.snapshots)


def test_corrupt_line_is_skipped_and_the_rest_played(
    tmp_path: Path, recorded: tuple[Driver, list[bytes]]
) -> None:
    """Issue 13: reading used to stop here and silently drop every good line after it."""
    driver, lines = recorded
    bad = len(lines) // 3
    path = _write(tmp_path, [*lines[:bad], b"\x00\xff garbage\n", *lines[bad:]])
    trace = load_trace(path)
    loaded = _step_lines_before(lines, bad)
    assert trace.warning is not None
    assert trace.warning.startswith(f"line {bad + 1} is corrupt")
    assert f"loaded {loaded} snapshots" in trace.warning
    assert "; skipped it, played the rest; " in trace.warning
    assert_same_run(driver.history()[:loaded], trace.snapshots[:loaded])
    assert_same_run(driver.history(), trace.snapshots)  # the garbage held nothing: all there


def test_a_lost_step_line_costs_that_step_only(
    tmp_path: Path, recorded: tuple[Driver, list[bytes]]
) -> None:
    """A step line overwritten in the middle: the deltas it held are lost (a token appended
    then), yet every later step plays, and each request ends as it did (rebuilt from its add
    event where its first delta was lost)."""
    driver, lines = recorded
    decoded = [json.loads(line) for line in lines]
    adding = next(i for i, line in enumerate(decoded) if "new" in line)
    steps = [i for i, line in enumerate(decoded) if i and line["k"] == "step" and "upd" in line]
    for bad in (adding, steps[len(steps) // 2]):  # one that adds requests, one mid-run
        damaged = [*lines[:bad], b'{"k": "step", "ste\x00\n', *lines[bad + 1 :]]
        trace = load_trace(_write(tmp_path, damaged))
        assert trace.warning is not None and trace.warning.startswith(f"line {bad + 1} is corrupt")
        assert "; skipped it, played the rest; " in trace.warning
        live = driver.history()
        assert len(trace.snapshots) == len(live) - 1
        last, live_last = trace.snapshots[-1], live[-1]
        assert (last.step, last.engine_state) == (live_last.step, live_last.engine_state)
        assert [(v.request_id, v.state, v.prompt) for v in last.finished] == [
            (v.request_id, v.state, v.prompt) for v in live_last.finished
        ]
        for replayed, view in zip(last.finished, live_last.finished, strict=True):
            # Tokens the lost line appended are lost (at most one step's), no more.
            got, want = replayed.completions[0].token_ids, view.completions[0].token_ids
            assert len(want) - 1 <= len(got) <= len(want)


def test_several_damaged_lines_are_counted_and_a_cut_end_is_said_too(
    tmp_path: Path, recorded: tuple[Driver, list[bytes]]
) -> None:
    driver, lines = recorded
    a, b = len(lines) // 4, len(lines) // 2
    damaged = [*lines[:a], b"oops\n", *lines[a:b], b"[1,\n", b"{}\n", *lines[b:-1], lines[-1][:9]]
    trace = load_trace(_write(tmp_path, damaged))
    assert trace.warning is not None
    assert trace.warning.startswith(f"line {a + 1} is corrupt (JSONDecodeError)")
    assert f"; skipped 3 damaged lines ({a + 1}, {b + 2}, {b + 3}), played the rest" in (
        trace.warning
    )
    assert trace.warning.endswith(f"; line {len(damaged)} (the last) is truncated")
    assert_same_run(driver.history()[:-1], trace.snapshots)


def test_line_that_contradicts_the_trace_is_corrupt(
    tmp_path: Path, recorded: tuple[Driver, list[bytes]]
) -> None:
    """Valid JSON that updates a request the trace never added: that line is skipped."""
    _, lines = recorded
    bogus = (
        b'{"k":"step","step":1,"clock":1.0,"state":"running","step_time":0.1,"upd":[{"id":"x"}]}\n'
    )
    path = _write(tmp_path, [*lines[:4], bogus, *lines[4:]])
    trace = load_trace(path)
    assert trace.warning is not None and trace.warning.startswith("line 5 is corrupt (KeyError")
    driver, _ = recorded
    assert_same_run(driver.history(), trace.snapshots)  # skipped; the rest plays


def test_unknown_line_kinds_are_skipped(
    tmp_path: Path, recorded: tuple[Driver, list[bytes]]
) -> None:
    """A later v1 writer may add line kinds; this reader ignores them."""
    driver, lines = recorded
    path = _write(tmp_path, [lines[0], b'{"k":"note","text":"hi"}\n', *lines[1:]])
    trace = load_trace(path)
    assert trace.warning is None
    assert_same_run(driver.history(), trace.snapshots)


def test_newer_version_is_refused(tmp_path: Path, recorded: tuple[Driver, list[bytes]]) -> None:
    _, lines = recorded
    header = json.loads(lines[0])
    header["version"] = TRACE_VERSION + 1
    path = _write(tmp_path, [json.dumps(header).encode() + b"\n", *lines[1:]])
    with pytest.raises(
        TraceError, match=f"trace version {TRACE_VERSION + 1}, written by a newer stepview"
    ):
        load_trace(path)
    header["version"] = "one"
    path = _write(tmp_path, [json.dumps(header).encode() + b"\n", *lines[1:]])
    with pytest.raises(TraceError, match="unknown trace version 'one'"):
        load_trace(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is not a stepview trace \\(it is empty\\)"),
        (b'{"prompt": "Hello", "max_tokens": 8}\n', "line 1 has no kind"),
        (b'{"kind": "other-tool", "version": 1}\n', "line 1 has 'other-tool' kind"),
        (b"Hello, my name is\nThe capital of France is\n", "line 1 is not JSON"),
        (b"[1, 2, 3]\n", "line 1 is not a JSON object"),
        (b'{"kind": "stepview-trace", "version": 1, "info": 7}\n', "engine info is not"),
        (random.Random(0).randbytes(4096), "not a stepview trace"),
        (b"\x89PNG" + b"\x00" * (2 << 20), "line 1 is not JSON"),  # no newline for 2 MB
    ],
    ids=[
        "empty",
        "prompts-jsonl",
        "other-kind",
        "prompts-text",
        "array",
        "bad-info",
        "random",
        "huge",
    ],
)
def test_not_a_trace(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "input"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=message):
        load_trace(path)
    with pytest.raises(TraceError, match=message):
        ReplaySource(path)  # fails before any thread starts, so the CLI can report it


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"cannot open trace .*nope\.jsonl"):
        load_trace(tmp_path / "nope.jsonl")
