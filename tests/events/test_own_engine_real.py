"""The events of stepview's own engine (the demo model, real vLLM), in both core modes.

``stepview --load N --headless --events - --events FILE --events http://127.0.0.1:0``, with
the engine core in stepview's process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: stepview reads
the scheduler itself) and in a process of its own (``=1``: the plug-in's records over a
socket), while an httpx reader follows the stream from the start of its buffer. Every
request of the load arrives and finishes once, in order; every event fits the shipped
schema; the stream, the file and standard output carry the same events; and standard output
carries nothing else (``--events -`` keeps it JSON only, one event a line).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stepview.model.load import LenRange, LoadSpec, plan_load
from tests.e2e.terminal import command_env
from tests.engine.watch.attach_helpers import Lines
from tests.events.checks import check_lives, validate_all
from tests.events.sse_reader import StreamReader

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

LOAD = 16
LOAD_FLAGS = ("--load", str(LOAD), "--rate", "inf", "--input-len", "4:12", "--output-len", "2:6")


@pytest.mark.parametrize("multiprocessing", ["0", "1"], ids=["core-in-process", "core-process"])
def test_own_engine_events_to_stdout_a_file_and_a_stream(
    multiprocessing: str, tmp_path: Path
) -> None:
    events_file = tmp_path / "events.jsonl"
    command = [
        *(sys.executable, "-m", "stepview", "--headless", *LOAD_FLAGS),
        *("--log-file", str(tmp_path / "log.txt"), "--events-step-rate", "all"),
        *("--events", "-", "--events", str(events_file), "--events", "http://127.0.0.1:0"),
    ]
    env = command_env({"VLLM_ENABLE_V1_MULTIPROCESSING": multiprocessing})
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert process.stderr is not None
        err = Lines(process.stderr)
        url = err.wait_for("serving events at", timeout=120).rsplit(" ", 1)[1]
        reader = StreamReader(url, last_id=0)  # all the buffer holds: nothing missed
        out, _ = process.communicate(timeout=480)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, "\n".join(err.seen)
    reader.ended.wait(30)  # the server closes the stream once every reader has had it all
    assert reader.ended.is_set()

    stdout_events = [json.loads(line) for line in out.splitlines()]  # every line is JSON
    assert validate_all(stdout_events) == len(stdout_events) > LOAD * 4
    expected = [a.request.request_id for a in plan_load(_spec())]
    check_lives(stdout_events, expected=expected)
    assert {e["id"] for e in stdout_events if "id" in e} == set(expected)
    finished = [e["id"] for e in stdout_events if e["event"] == "finished"]
    assert sorted(finished) == sorted(expected)
    steps = [e["step"] for e in stdout_events]
    assert steps == sorted(steps)

    file_events = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert file_events == stdout_events
    stream_events = [data for _, data in reader.events]
    assert stream_events == stdout_events
    assert reader.ids == list(range(1, len(stream_events) + 1))


def _spec() -> LoadSpec:
    """The load the flags above ask for (the same flags make the same requests)."""
    return LoadSpec(count=LOAD, input_len=LenRange(4, 12), output_len=LenRange(2, 6))
