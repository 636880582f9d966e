"""``--export-workload``: stepview's prompts file reads back as the same requests, arrivals
and all; vLLM's ``timed_trace`` lines keep shared prefixes shared."""

from __future__ import annotations

from pathlib import Path

from stepview.files.prompts_file import prompt_commands, read_timed_prompts
from stepview.files.workload_export import (
    BlockIds,
    timed_trace_command,
    timed_trace_lines,
    workload_target,
    write_workload,
)
from stepview.model.chat import ChatMessage
from stepview.model.commands import AddRequest, Schedule
from stepview.model.prompts import token_ids_name
from stepview.model.sampling import SamplingSpec
from stepview.trace.workload import Skipped, Workload, WorkloadRequest

SPEC = SamplingSpec(temperature=0.0, max_tokens=4, ignore_eos=True)


def item(
    at: float,
    request: AddRequest,
    ran: tuple[int, ...] = (),
    outputs: tuple[int, ...] = (4,),
    *,
    forced: bool = False,
) -> WorkloadRequest:
    return WorkloadRequest(at, request, ran or request.prompt_token_ids, outputs, forced)


def a_workload(block_size: int = 4) -> Workload:
    return Workload(
        requests=(
            item(0.0, AddRequest("text", "Once upon a time", SPEC), (7, 8, 9), forced=True),
            item(0.25, AddRequest("ids", token_ids_name(3), SPEC, (1, 2, 3))),
            item(
                1.5,
                AddRequest("chat", "", SPEC, messages=(ChatMessage("user", "Hi?"),)),
                (5, 6),
            ),
        ),
        skipped=(Skipped("lost", "its prompt was seen only as token ids"),),
        block_size=block_size,
        attached=False,
    )


def test_the_prompts_file_reads_back_as_the_same_requests_at_the_same_times(
    tmp_path: Path,
) -> None:
    path = tmp_path / "workload.jsonl"
    workload = a_workload()
    count, skipped = write_workload(path, workload, vllm=False, source="run.trace")
    assert count == 3 and [s.request_id for s in skipped] == ["lost"]
    text = path.read_text()
    assert "# skipped lost: its prompt was seen only as token ids" in text
    assert "# 1 with their recorded output length forced (ignore_eos, max_tokens): text" in text
    assert read_timed_prompts(path) == [(i.at, i.request) for i in workload.requests]
    [schedule] = prompt_commands(path)  # every line has "at": one timed arrival pattern
    assert isinstance(schedule, Schedule) and len(schedule.arrivals) == 3


def test_vllms_timed_trace_shares_ids_as_far_as_prompts_share_blocks() -> None:
    blocks = BlockIds(4)
    first = blocks.of((1, 2, 3, 4, 5, 6, 7, 8, 9))
    same_start = blocks.of((1, 2, 3, 4, 5, 6, 7, 8, 0))
    other_start = blocks.of((0, 2, 3, 4, 5, 6, 7, 8, 9))  # block 2 has the same tokens ...
    assert len(first) == 3  # two whole blocks and a partial one: 9 tokens
    assert same_start[:2] == first[:2] and same_start[2] != first[2]
    assert not set(other_start) & set(first)  # ... but follows another prefix: not shared


def test_vllms_timed_trace_is_one_line_per_sample_in_order_of_arrival() -> None:
    workload = Workload(
        requests=(
            item(0.5, AddRequest("two", "p", SamplingSpec(n=2, max_tokens=9)), (1, 2), (3, 9)),
            item(0.75, AddRequest("waited", "p", SamplingSpec(max_tokens=6)), (1, 2, 3), ()),
            item(1.0, AddRequest("rejected", "far too long", SPEC), (), ()),
        ),
        skipped=(),
        block_size=0,  # a trace that does not say: vLLM's default
        attached=False,
    )
    lines, skipped = timed_trace_lines(workload)
    assert [(line["id"], line["output_length"]) for line in lines] == [
        ("two", 3),
        ("two", 9),
        ("waited", 6),  # produced nothing: what it asked for
    ]
    assert lines[0] == {
        "timestamp": 0.5,
        "input_length": 2,
        "output_length": 3,
        "hash_ids": [0],
        "id": "two",
    }
    assert [(s.request_id, s.why) for s in skipped] == [
        ("rejected", "its prompt was never tokenized")
    ]
    command = timed_trace_command(Path("w.jsonl"), len(lines), workload.block_size)
    assert "--timed-trace-chunk-hash-size 16 --num-prompts 3" in command


def test_a_target_says_which_format() -> None:
    assert workload_target("vllm:out/w.jsonl") == (True, Path("out/w.jsonl"))
    assert workload_target("./vllm:w.jsonl") == (False, Path("vllm:w.jsonl"))
    assert workload_target("w.jsonl") == (False, Path("w.jsonl"))
