"""``--events`` from the command line: a replayed trace's events (file, stdout, HTTP), and
bad input refused in one line with exit code 2 (no engine needed)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from stepview.engine.driver.loop import Driver
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.testing.fake_engine import FakeEngine
from stepview.testing.vllm_server import ROOT
from stepview.trace.recorder import TraceRecorder
from tests.events.checks import check_lives, validate_all
from tests.events.sse_reader import StreamReader
from tests.helpers import wait_for

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SERVED = ("--events", "http://127.0.0.1:0")


def _stepview(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stepview", *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace of the fake engine with a small KV cache: waits and preemptions in it."""
    path = tmp_path_factory.mktemp("trace") / "run.jsonl"
    recorder = TraceRecorder(path)
    engine = FakeEngine(max_num_seqs=4, num_kv_blocks=12, block_size=8)
    driver = Driver(lambda phase: engine, sinks=[recorder])
    driver.start()
    for i in range(10):
        spec = SamplingSpec(max_tokens=10, temperature=0.0)
        driver.send(AddRequest(f"q{i}", "word " * (5 + i), spec))
    wait_for(driver, lambda s: len(s.finished) == 10, timeout=60)
    driver.stop()
    return path


def test_a_replay_writes_its_events_then_exits(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "events.jsonl"
    done = _stepview("--replay", str(trace), "--headless", "--events", str(out))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert validate_all(events) == len(events)
    check_lives(events, expected=[f"q{i}" for i in range(10)])
    printed = _stepview("--replay", str(trace), "--headless", "--events", "-")
    assert printed.returncode == 0, printed.stderr
    on_stdout = [json.loads(line) for line in printed.stdout.splitlines()]
    assert [e["event"] for e in on_stdout] == [e["event"] for e in events]


def test_a_replay_served_over_http_waits_for_a_reader(trace: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "stepview", "--replay", str(trace), "--headless", *SERVED],
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=ENV,
    )
    try:
        assert child.stderr is not None
        line = child.stderr.readline()
        assert "serving events at" in line, line
        reader = StreamReader(line.rsplit(" ", 1)[1].strip(), last_id=0)
        assert child.wait(60) == 0
        assert reader.ended.wait(30)
        events = [e for _, e in reader.events]
        check_lives(events, expected=[f"q{i}" for i in range(10)])
        assert reader.ids == list(range(1, len(events) + 1))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)


def test_a_destination_that_cannot_be_had_is_one_line(trace: Path, tmp_path: Path) -> None:
    nowhere = tmp_path / "missing" / "events.jsonl"
    watched = ("--attach", "tcp://127.0.0.1:9", "--headless", "--log-file")
    log = str(tmp_path / "log")
    cases = [
        (("--replay", str(trace), "--headless", "--events", str(nowhere)), "--events"),
        ((*watched, log, "--events", str(nowhere)), "cannot write --events"),
        ((*watched, log, "--events", "http://0.0.0.0:8765"), "--events-remote"),
        ((*watched, log, "--events", "ftp://x"), "not -, a file or http://"),
        ((*watched, log, "--events-token", "t"), "--events-token goes with --events DEST"),
        (("--attach", "tcp://127.0.0.1:9", "--events", "-"), "use --headless"),
    ]
    for args, said in cases:
        done = _stepview(*args)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], (args, lines)
        assert "Traceback" not in done.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _stepview(*watched, log, "--events", f"http://127.0.0.1:{port}")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"stepview: cannot serve events on 127.0.0.1:{port}: address in use"
    )
