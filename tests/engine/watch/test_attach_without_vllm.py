"""``--attach`` on a machine without vLLM or torch: the install pyproject promises for a laptop.

The child process runs with ``tests/hide_vllm`` on its path, so ``import vllm``, ``import
torch`` and ``import transformers`` fail in it as if they were not installed. If anything on the
attach path (the command line, the watching client, the driver, the results file, the trace,
the latency table) reached for them, the watch would die instead of printing its results.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from stepview.engine.records.facts import EndedFacts
from tests.engine.watch.attach_helpers import Server, record, request, watch_command, watching
from tests.engine.watch.fake_api import FakeApi
from tests.helpers import ROOT


def test_attach_headless_runs_with_vllm_and_torch_hidden(
    server: Server, fake_api: FakeApi, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests' / 'hide_vllm'}{os.pathsep}{ROOT}"}
    results, trace = tmp_path / "results.jsonl", tmp_path / "run.trace.jsonl"
    command = [
        *watch_command(server.address, tmp_path),
        *("--api", fake_api.url, "--results", str(results), "--record", str(trace)),
    ]
    with watching(command, env=env) as watch:
        server.wait_subscribed(timeout=30)
        watch.err.wait_for("stepview: watching")
        server.send(
            record(1, request("a-0123abcd", outputs=1, new=[7])),
            record(
                2,
                idle=True,
                finished=["a-0123abcd"],
                ended=[EndedFacts("a-0123abcd", 2, [7, 8], "stop")],
            ),
        )
        done = json.loads(watch.out.wait_for('"id": "a"'))
        assert (done["state"], done["completions"][0]["token_ids"]) == ("finished", [7, 8])
        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(15) == 0, watch.err.rest()
        lines = watch.err.rest()
        assert not any("hidden by tests/hide_vllm" in line for line in lines), lines
        assert any("TTFT" in line for line in lines), lines
    assert [json.loads(line)["id"] for line in results.read_text().splitlines()] == ["a"]
    assert trace.read_text().count('"k":"step"') >= 2
