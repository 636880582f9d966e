"""The files people hand stepview: prompts files (text and chat), results files read back as
prompts, and Prometheus' file_sd target groups (JSON and YAML). Each returns its value or
raises its one error: :class:`PromptsFileError`, :class:`TargetGroupsError`."""

from __future__ import annotations

import json
from typing import Any

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from stepview.files.file_sd import TargetGroupsError, parse_target_groups
from stepview.files.prompts_file import PromptsFileError, parse_prompts
from stepview.files.records import request_record
from stepview.testing.snapshots import mid_run
from tests.fuzz.inputs import BYTES, TEXT, dumps, json_lines, mutated
from tests.fuzz.profiles import MAX_INPUT, bounded

PROMPTS: list[Any] = [
    {"id": "a", "prompt": "Hello", "params": {"max_tokens": 5, "temperature": 0.5}},
    {"prompt": "stop", "params": {"stop": ["x"], "n": 2, "seed": 3, "logprobs": 2}, "at": 1.5},
    {"id": "chat", "messages": [{"role": "system", "content": "Be brief."}]},
    {"messages": [{"role": "user", "content": "Hi"}], "params": {"ignore_eos": True}},
    {"prompt_token_ids": [1, 2, 3], "params": {"top_p": 0.9, "top_k": 4}, "at": 0},
]
RESULTS: list[Any] = [request_record(view) for view in mid_run().requests()]
"""A results file's records (every state a run leaves), as ``--results`` writes them."""


def read(lines: list[bytes]) -> None:
    bounded(lambda: parse_prompts(lines, "fuzzed.jsonl"), PromptsFileError)


@given(st.lists(BYTES, max_size=8))
@example([b'{"prompt": ' + b"[" * 5_000 + b"}\n"])  # RecursionError escaped: a traceback
def test_prompts_file_of_noise(lines: list[bytes]) -> None:
    read(lines)


@given(json_lines(PROMPTS))
def test_prompts_file_text_and_chat(lines: list[str]) -> None:
    read([line.encode("utf-8", "surrogatepass") + b"\n" for line in lines])


@given(json_lines(RESULTS))
def test_results_file_read_back(lines: list[str]) -> None:
    read([line.encode("utf-8", "surrogatepass") + b"\n" for line in lines])


GROUPS: list[Any] = [
    {"targets": ["gpu-a:8000", "gpu-b"], "labels": {"zone": "a", "__scheme__": "https"}},
    {"targets": ["[::1]:9"], "labels": {"__metrics_path__": "/p/metrics", "__meta_x": "y"}},
    {"targets": []},
]


def read_groups(text: str, name: str) -> None:
    bounded(lambda: parse_target_groups(text[:MAX_INPUT], name), TargetGroupsError)


@given(TEXT, st.sampled_from(["t.json", "t.yml"]))
@example("[" * 5_000, "t.json")  # RecursionError escaped (JSON)
@example("[" * 5_000, "t.yml")  # ... and YAML
@example("[" * 12_000, "t.yml")  # PyYAML's time grows with depth squared: minutes, a hang
def test_file_sd_of_noise(text: str, name: str) -> None:
    read_groups(text, name)


@given(mutated(GROUPS))
def test_file_sd_json(groups: Any) -> None:
    read_groups(dumps(groups), "t.json")


@given(mutated(GROUPS))
def test_file_sd_yaml(groups: Any) -> None:
    try:
        text = yaml.safe_dump(groups, allow_unicode=True)
    except yaml.YAMLError:  # a value PyYAML cannot write (a lone surrogate): JSON is YAML
        text = json.dumps(groups)
    read_groups(text, "t.yaml")
