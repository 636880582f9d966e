"""``stepview --headless`` end to end: the real command, real vLLM on the demo model."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.terminal import command_env

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
    # vLLM's logging and C++ warnings went to the log file, not the terminal.
    assert done.stderr.strip() == ""


@pytest.mark.engine
def test_json_prompts_file_with_rejections(run_stepview, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    prompts = tmp_path / "prompts.jsonl"
    lines = [
        {"id": "ok", "prompt": "hello world", "params": {"temperature": 0, "max_tokens": 5}},
        {"id": "long", "prompt": "word " * 2000, "params": {"max_tokens": 4}},
        {"id": "lp", "prompt": "logprobs please", "params": {"logprobs": 2, "max_tokens": 3}},
    ]
    prompts.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    done = run_stepview(["--headless", "--json", "--prompts", str(prompts)])
    assert done.returncode == 1  # a request was rejected
    records = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert records["ok"]["state"] == "finished"
    assert len(records["ok"]["completions"][0]["token_ids"]) == 5
    assert records["long"]["state"] == "rejected"
    assert "maximum context length is 512 tokens" in records["long"]["error"]
    assert "request long rejected" in done.stderr
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


@pytest.mark.engine
def test_sigterm_mid_run_exits_cleanly_with_whole_lines(tmp_path: Path) -> None:
    prompts = tmp_path / "many.jsonl"
    line = {"prompt": "a long story about engines", "params": {"max_tokens": 200, "seed": 1}}
    prompts.write_text("\n".join(json.dumps(line) for _ in range(400)) + "\n")
    results = tmp_path / "results.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stepview",
            "--headless",
            "--json",
            "--prompts",
            str(prompts),
            "--results",
            str(results),
            "--log-file",
            str(tmp_path / "log.txt"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=command_env(),
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # blocks until the first request finished
    assert json.loads(first)["state"] == "finished"
    proc.send_signal(signal.SIGTERM)
    start = time.monotonic()
    out, err = proc.communicate(timeout=10)
    assert time.monotonic() - start < 5
    assert proc.returncode == 1
    assert "interrupted" in err
    printed = [json.loads(x) for x in [first, *out.splitlines()]]  # every line is whole JSON
    saved = [json.loads(x) for x in results.read_text().splitlines()]
    assert [r["id"] for r in saved] == [r["id"] for r in printed]
    assert len(printed) < 400
