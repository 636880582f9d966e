"""``stepview --headless`` end to end: the real command, real vLLM on the demo model."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from stepview.launch.headless import HeadlessPrinter
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState, RequestView, StepSnapshot, Timings
from tests.e2e.terminal import command_env
from tests.reliability.process_watch import Watch, left_behind, watch

__all__ = ["watch"]

DASHES = "-" * 50


@pytest.mark.engine
def test_seed_prompts_printed_like_vllms_example(run_stepview) -> None:  # type: ignore[no-untyped-def]
    done = run_stepview(["--headless"])
    assert done.returncode == 0, done.stderr
    blocks = [b.strip() for b in done.stdout.split(DASHES) if b.strip()]
    assert done.stdout.startswith(DASHES)
    assert len(blocks) == 3
    assert all(b.startswith("RequestOutput(request_id=") for b in blocks)
    by_id = {re.match(r"RequestOutput\(request_id=(\d+)", b).group(1): b for b in blocks}  # type: ignore[union-attr]
    assert "A robot may not injure a human being" in by_id["0"]
    # 4 completions in all: two for the n=2 prompt.
    assert done.stdout.count("CompletionOutput(") == 4
    assert by_id["2"].count("CompletionOutput(index=") == 2
    assert "CompletionOutput(index=1" in by_id["2"]
    # logprobs and prompt logprobs on the first prompt only.
    assert "prompt_logprobs=[None, {" in by_id["0"]
    assert "logprobs=[{" in by_id["0"].split("outputs=")[1]
    assert "prompt_logprobs=None" in by_id["1"]
    # vLLM's logging and C++ warnings went to the log file, not the terminal: stderr holds
    # only the end-of-run summary.
    summary = done.stderr.strip().splitlines()
    assert summary[0].startswith("stepview summary: ") and "3 requests finished" in summary[0]
    assert any(line.startswith("TTFT (s) ") for line in summary)
    assert summary[-1] == "alerts: none"


@pytest.mark.engine
def test_json_prompts_on_stdin_with_rejections_leaving_no_helper(
    tmp_path: Path, watch: Watch
) -> None:
    """``generate | stepview --headless --json --prompts -``: what every Unix tool does, read
    like a file (a prompt too long is rejected, exit 1, the others run; logprobs asked for
    are there). The engine in stepview's process (the default) leaves no helper process
    after the run's end: every process the run ever had is gone once it has. One engine
    start for what were two tests (a prompts file, stdin)."""
    lines = [
        {"id": "ok", "prompt": "hello world", "params": {"temperature": 0, "max_tokens": 5}},
        {"id": "long", "prompt": "word " * 2000, "params": {"max_tokens": 4}},
        {"id": "lp", "prompt": "logprobs please", "params": {"logprobs": 2, "max_tokens": 3}},
        {"id": "b", "prompt": "from a pipe", "params": {"max_tokens": 2, "seed": 1}},
    ]
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "stepview", "--headless", "--json", "--prompts", "-"),
            *("--log-file", str(tmp_path / "log.txt")),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=command_env(),
        cwd=tmp_path,
    )
    run = watch(psutil.Process(proc.pid))
    out, err = proc.communicate("".join(json.dumps(line) + "\n" for line in lines), timeout=600)
    assert proc.returncode == 1, err  # a request was rejected
    assert left_behind(run.close()) == []
    records = {r["id"]: r for r in map(json.loads, out.splitlines())}
    assert set(records) == {"ok", "long", "lp", "b"}
    assert records["ok"]["state"] == records["b"]["state"] == "finished"
    assert len(records["ok"]["completions"][0]["token_ids"]) == 5
    assert records["long"]["state"] == "rejected"
    assert "maximum context length is 512 tokens" in records["long"]["error"]
    assert "request long rejected" in err
    lp = records["lp"]["completions"][0]["logprobs"]
    assert len(lp) == 3 and all(len(position) >= 2 for position in lp)


def test_bad_prompts_file_names_the_line(run_stepview, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        '{"prompt": "fine"}\n# a comment\n{"prompt": "hot", "params": {"temperature": 7}}\n'
    )
    done = run_stepview(["--headless", "--prompts", str(prompts)])
    assert done.returncode == 2
    assert f"{prompts}:3: temperature must be in [0, 2], got 7.0." in done.stderr
    assert done.stdout == ""

    prompts.write_text('{"prompt": "fine"}\n{"prompt": "cut\n')
    done = run_stepview(["--headless", "--prompts", str(prompts)])
    assert done.returncode == 2
    assert f"{prompts}:2: not valid JSON" in done.stderr

    done = run_stepview(["--headless", "--prompts", str(tmp_path / "missing.jsonl")])
    assert done.returncode == 2
    assert "cannot read prompts file" in done.stderr


def ramp_prompts(path: Path, count: int) -> Path:
    """``count`` seeded prompts whose lengths ramp up, so they finish one after another."""
    lines = [
        {"id": f"r{i}", "prompt": f"story {i}", "params": {"max_tokens": 8 + 12 * i, "seed": i}}
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.engine
def test_reader_going_away_stops_at_once_quietly_keeping_the_results(tmp_path: Path) -> None:
    """``stepview --headless --json | head -1``: what a Unix filter does. No traceback, no
    message, the engine shut down at once, exit 141 (a filter stopped by a closed pipe); the
    results file still names every request, the ones not run as unfinished. The trace header
    holds the engine's flags, none of stepview's own (``headless``, ``record``)."""
    results = tmp_path / "results.jsonl"
    trace = tmp_path / "run.trace.jsonl"
    prompts = ramp_prompts(tmp_path / "prompts.jsonl", 30)
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "stepview", "--headless", "--json"),
            *("--prompts", str(prompts), "--results", str(results), "--record", str(trace)),
            *("--log-file", str(tmp_path / "log.txt"), "--max-num-seqs", "2"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=command_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = json.loads(proc.stdout.readline())  # what head -1 reads, then it goes away
    proc.stdout.close()
    try:
        # A failsafe only: a run that kept going would finish all 30 and fail below.
        err = proc.communicate(timeout=600)[1].decode()
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 141
    assert err == ""
    saved = [json.loads(line) for line in results.read_text().splitlines()]
    assert saved[0]["id"] == first["id"] and len(saved) == 30
    assert sorted(r["id"] for r in saved) == sorted(f"r{i}" for i in range(30))
    assert {r["state"] for r in saved} == {"finished", "unfinished"}  # at once: not run out
    assert "Traceback" not in (tmp_path / "log.txt").read_text()
    header = json.loads(trace.read_text().splitlines()[0])
    assert header["engine_args"]["max_num_seqs"] == 2
    assert {"headless", "record", "results", "json", "prompts"}.isdisjoint(header["engine_args"])


class _ClosedPipe(io.StringIO):
    """stdout whose reader went away."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_printer_stops_quietly_when_the_reader_goes_away() -> None:
    """A failed print raises nothing on the driver thread (which would end the run as
    "engine failed: BrokenPipeError"): the printer stops and asks the run to end."""
    err = io.StringIO()
    printer = HeadlessPrinter(2, json_lines=True, out=_ClosedPipe(), err=err)
    view = RequestView("0", "p", SamplingSpec(), RequestState.FINISHED, Timings(0.0))
    snapshot = StepSnapshot(step=1, clock=1.0, engine_state=EngineState.RUNNING)
    printer.on_snapshot(snapshot, [view])
    assert printer.pipe_closed and printer.done.is_set()
    printer.on_snapshot(snapshot, [view._replace(request_id="1")])  # not tried again
    assert err.getvalue() == ""
