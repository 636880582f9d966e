"""A prompts file's ``prompt_token_ids``: a prompt given as token ids (what a recorded
ids-only prompt is exported as), checked like any key; and a results record of such a request
read back as its ids, not as the name it was shown by."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepview.files.prompts_file import PromptsFileError, read_timed_prompts
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec


def _prompts(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_prompt_token_ids_are_a_prompt_of_ids(tmp_path: Path) -> None:
    path = _prompts(tmp_path, {"id": "x", "prompt_token_ids": [5, 0, 7], "at": 2})
    assert read_timed_prompts(path) == [
        (2.0, AddRequest("x", "(3 token ids)", SamplingSpec(), (5, 0, 7)))
    ]


def test_a_results_record_of_an_ids_prompt_reads_back_as_its_ids(tmp_path: Path) -> None:
    record = {
        "id": "load-3",
        "prompt": "(synthetic greedy: 2 random token ids)",
        "prompt_token_ids": [101, 102],
        "params": {"max_tokens": 3},
        "state": "finished",
    }
    [(_, request)] = read_timed_prompts(_prompts(tmp_path, record))
    assert request.prompt_token_ids == (101, 102)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ({"prompt_token_ids": []}, '"prompt_token_ids" must be a non-empty list of token ids'),
        ({"prompt_token_ids": "1 2"}, '"prompt_token_ids" must be a non-empty list'),
        ({"prompt_token_ids": [1, -2]}, '"prompt_token_ids" must hold token ids (0 or more)'),
        ({"prompt_token_ids": [1, True]}, '"prompt_token_ids" must hold token ids'),
        ({"prompt": "a", "prompt_token_ids": [1]}, 'give "prompt" or "prompt_token_ids", not both'),
    ],
)
def test_bad_prompt_token_ids_name_the_line(tmp_path: Path, line: object, problem: str) -> None:
    path = _prompts(tmp_path, {"prompt": "fine"}, line)
    with pytest.raises(PromptsFileError) as caught:
        read_timed_prompts(path)
    assert str(caught.value).startswith(f"{path}:2: {problem}"), caught.value
