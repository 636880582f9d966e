"""A run killed mid-way keeps every result it had produced, and its trace loads up to the kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from stepview.trace.reader import load_trace

# Runs the driver until killed. A last sink prints each finished id only after the results
# writer and the recorder (earlier sinks) have written and flushed it, and from the twelfth
# on holds the driver there: the kill lands mid-run however late the test reads the ids.
CHILD = """
import sys
import threading
from stepview.engine.driver.loop import Driver
from stepview.testing.fake_engine import FakeEngine
from stepview.files.results_file import ResultsWriter
from stepview.trace.recorder import TraceRecorder
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec

class Announce:
    error = None

    announced = 0

    def on_snapshot(self, snapshot, finished):
        for view in finished:
            print(view.request_id, flush=True)
            self.announced += 1
        if self.announced >= 12:
            threading.Event().wait()

    def close(self):
        pass

results, trace = sys.argv[1:3]
engine = FakeEngine(step_delay=0.004, max_num_seqs=4)
sinks = [ResultsWriter(results), TraceRecorder(trace), Announce()]
driver = Driver(lambda phase: engine, sinks=sinks)
driver.start()
driver.send(AddRequest("bad", "hi", SamplingSpec(top_p=0.0)))
for i in range(60):
    driver.send(AddRequest(f"r{i}", "hello there", SamplingSpec(max_tokens=3 + (i * 7) % 20)))
driver.join()
"""


def test_results_and_trace_survive_sigkill(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    trace_path = tmp_path / "trace.jsonl"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(results), str(trace_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    announced: list[str] = []
    try:
        while len(announced) < 12:
            line = child.stdout.readline()
            assert line, f"child ended early with {child.wait()}"
            announced.append(line.strip())
    finally:
        os.kill(child.pid, signal.SIGKILL)
        tail, _ = child.communicate(timeout=30)
    announced.extend(tail.split())
    assert child.returncode == -signal.SIGKILL
    assert "bad" in announced  # rejections are results too

    text = results.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines.pop()  # killed in the middle of a write: only that line may be cut
    records = [json.loads(line) for line in lines]
    assert set(announced) <= {r["id"] for r in records}
    assert len(records) < 61  # it was killed before the end
    by_id = {r["id"]: r for r in records}
    assert by_id["bad"]["state"] == "rejected" and "top_p" in by_id["bad"]["error"]
    assert all(len(r["completions"][0]["token_ids"]) >= 3 for r in records if r["id"] != "bad")

    trace = load_trace(trace_path)  # at most the step in flight is lost
    assert trace.snapshots
    finished = {v.request_id for v in trace.snapshots[-1].finished}
    assert set(announced) <= finished
