"""A real API server locked two ways: ``--api-key`` on its API, and CURVE on the plug-in's
records, published on ``tcp://0.0.0.0`` (allowed only because CURVE guards it).

``stepview --attach … --api … --headless --json --prompts`` with the key and the watch's CURVE
keys gets its prompt answered and sees it finish in the records; without the API key the
prompt is refused with the line that says which variable to set, and the key never appears
in anything stepview wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import API_KEY as KEY
from tests.servers import Served

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]


def _attach(
    locked: Served, tmp_path: Path, env: dict[str, str], name: str
) -> subprocess.CompletedProcess[str]:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "The sea", "params": {"max_tokens": 4}}\n')
    assert locked.publish is not None
    command = [sys.executable, "-m", "stepview", "--attach", locked.publish]
    command += ["--api", locked.url, "--headless", "--json"]
    command += ["--prompts", str(prompts), "--log-file", str(tmp_path / f"{name}.log")]
    command += ["--results", str(tmp_path / f"{name}.jsonl")]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)


def test_the_key_and_curve_let_a_watch_in_and_a_missing_key_is_named(
    locked_server: Served, tmp_path: Path
) -> None:
    curve = locked_server.curve
    watch_env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    watch_env.update({k: v for k, v in curve.items() if k.startswith("STEPVIEW_ATTACH_")})

    keyed = _attach(locked_server, tmp_path, {**watch_env, "VLLM_API_KEY": KEY}, "keyed")
    assert keyed.returncode == 0, keyed.stderr
    (record,) = [json.loads(line) for line in keyed.stdout.splitlines()]
    assert record["state"] == "finished" and record["completions"][0]["finish_reason"]
    assert len(record["completions"][0]["token_ids"]) >= 1

    refused = _attach(locked_server, tmp_path, watch_env, "refused")
    assert refused.returncode == 1
    assert "the server wants an API key (401 Unauthorized): give it with --api-key" in (
        refused.stderr
    )
    for written in tmp_path.glob("*"):
        if written.suffix in (".log", ".jsonl"):
            assert KEY not in written.read_text(errors="replace"), written
