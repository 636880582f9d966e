"""vLLM's own benchmark dataset (``vllm bench serve --dataset-name timed_trace``), imported
from the installed vLLM and never started, reads ``--export-workload vllm:FILE`` into the
requests recorded: their arrival offsets, prompt and output lengths, and shared prefixes."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from stepview.files.workload_export import write_workload
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.trace.workload import Workload, WorkloadRequest

BLOCK = 4


def _timed_trace_args(path: Path, chunk: int) -> dict[str, object]:
    """The benchmark's own defaults for the dataset's flags, as ``vllm bench serve`` parses
    them, with the file and the chunk size the export names."""
    from vllm.benchmarks.datasets.datasets import add_dataset_parser

    parser = argparse.ArgumentParser()
    add_dataset_parser(parser)  # type: ignore[arg-type]  # vLLM's FlexibleArgumentParser
    args = parser.parse_args(
        [
            "--dataset-name",
            "timed_trace",
            "--dataset-path",
            str(path),
            "--timed-trace-chunk-hash-size",
            str(chunk),
        ]
    )
    return vars(args)


@pytest.mark.engine
def test_vllms_timed_trace_dataset_reads_the_export(tmp_path: Path, demo_model_path: Path) -> None:
    from transformers import AutoTokenizer
    from vllm.benchmarks.datasets.datasets import TimedTrace

    shared = tuple(range(100, 108))  # two whole blocks both prompts begin with
    spec = SamplingSpec(max_tokens=16)
    workload = Workload(
        requests=(
            WorkloadRequest(0.0, AddRequest("a", "p", spec), (*shared, 1, 2, 3), (5,), False),
            WorkloadRequest(0.5, AddRequest("b", "p", spec), (*shared, 4), (7,), True),
        ),
        skipped=(),
        block_size=BLOCK,
        attached=False,
    )
    path = tmp_path / "workload.jsonl"
    count, _ = write_workload(path, workload, vllm=True, source="run.trace")
    dataset = TimedTrace(**_timed_trace_args(path, BLOCK))
    tokenizer = AutoTokenizer.from_pretrained(str(demo_model_path))
    samples = dataset.sample(tokenizer=tokenizer, num_requests=count)
    assert [(s.timestamp, s.prompt_len, s.expected_output_len) for s in samples] == [
        (0.0, 11, 5),
        (0.5, 9, 7),
    ]
    a, b = (s.prompt for s in samples)
    assert a[:8] == b[:8]  # the blocks both began with: the same (random) tokens again
