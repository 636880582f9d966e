"""Chat requests in a prompts file (``"messages"``), and a results record fed back as one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepview.files.prompts_file import PromptsFileError, read_prompts
from stepview.files.records import request_record
from stepview.model.chat import ChatMessage
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState, RequestView, Timings

QUESTION = "What is the capital of France?"


def prompts_file(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )
    return path


def test_messages_make_a_chat_request_with_no_prompt_of_its_own(tmp_path: Path) -> None:
    path = prompts_file(
        tmp_path,
        {"prompt": "plain", "params": {"max_tokens": 4}},
        {
            "id": "c",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": QUESTION},
            ],
            "params": {"temperature": 0, "max_tokens": 8},
        },
    )
    plain, chat = read_prompts(path)
    assert plain == AddRequest("0", "plain", SamplingSpec(max_tokens=4))
    assert chat == AddRequest(
        "c",
        "",
        SamplingSpec(temperature=0, max_tokens=8),
        messages=(ChatMessage("system", "Be brief."), ChatMessage("user", QUESTION)),
    )


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            {"prompt": "x", "messages": [{"role": "user", "content": "y"}]},
            'give "prompt" or "messages" (a chat), not both',
        ),
        ({"params": {}}, 'no "prompt" (or "messages", for a chat)'),
        ({"messages": []}, '"messages" must be a non-empty list'),
        ({"messages": "hi"}, '"messages" must be a non-empty list'),
        ({"messages": ["hi"]}, '"messages" item 1 must be an object'),
        (
            {"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]},
            '"messages" item 2: "role" must be one of system, user, assistant, got \'bot\'',
        ),
        ({"messages": [{"role": "user", "content": 3}]}, '"messages" item 1: "content" must be'),
        ({"messages": [{"role": "user", "text": "a"}]}, '"messages" item 1: unknown key(s) text'),
        (
            {"messages": [{"role": "system", "content": "x"}]},
            '"messages" has no user message with text',
        ),
    ],
)
def test_a_bad_chat_line_names_the_file_line_and_problem(
    tmp_path: Path, line: object, problem: str
) -> None:
    path = prompts_file(tmp_path, {"prompt": "fine"}, line)
    with pytest.raises(PromptsFileError) as caught:
        read_prompts(path)
    assert str(caught.value).startswith(f"{path}:2: {problem}")


def test_a_results_record_of_a_chat_request_reads_back_as_the_same_request(
    tmp_path: Path,
) -> None:
    messages = (ChatMessage("user", QUESTION),)
    spec = SamplingSpec(temperature=0.0, max_tokens=8)
    view = RequestView(
        request_id="u1",
        prompt="<|user|>What is the capital of France?\n<|assistant|>",
        spec=spec,
        state=RequestState.FINISHED,
        timings=Timings(arrival=0.0),
        messages=messages,
    )
    plain = view._replace(request_id="u2", prompt="To be", messages=())
    path = prompts_file(tmp_path, request_record(view), request_record(plain))
    record = json.loads(path.read_text().splitlines()[0])
    assert record["messages"] == [{"role": "user", "content": QUESTION}]
    assert json.loads(path.read_text().splitlines()[1])["messages"] is None
    assert read_prompts(path) == [
        AddRequest("u1", "", spec, messages=messages),
        AddRequest("u2", "To be", spec),
    ]
