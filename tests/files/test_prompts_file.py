"""Reading ``--prompts``: a file, or standard input for ``-``, with the place and line named.

Standard input is read in-process here (``sys.stdin`` replaced by bytes), so the parsing of
what a pipe brings is checked without a subprocess; the real pipe is in ``tests/launch``.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from stepview.cli.args import parse_own_args
from stepview.files.prompts_file import STDIN, PromptsFileError, read_timed_prompts
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec


def stdin_holding(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_prompts_on_stdin_are_read_like_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [{"id": "a", "prompt": "one"}, {"prompt": "two", "at": 1.5}]
    text = "# made by a script\n" + "".join(json.dumps(line) + "\n" for line in lines)
    stdin_holding(monkeypatch, text.encode())
    assert read_timed_prompts(STDIN) == [
        (None, AddRequest("a", "one", SamplingSpec())),
        (1.5, AddRequest("1", "two", SamplingSpec())),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"prompt": "a"}\n\n{"prompt": "b"\n', "<stdin>:3: not valid JSON"),
        (b'{"prompt": "a"}\n{"prompt": "caf\xe9"}\n', "<stdin>:2: not UTF-8 text"),
        (b'{"prompt": "a", "params": {"temp": 1}}', "<stdin>:1: unknown sampling parameter"),
        (b'{"id": "x", "prompt": "a"}\n{"id": "x", "prompt": "b"}\n', "<stdin>:2: duplicate id"),
        (b"# nothing but a comment\n", "<stdin>: no prompts in the input"),
        (b"", "<stdin>: no prompts in the input"),
    ],
)
def test_a_problem_on_stdin_names_stdin_and_the_line(
    monkeypatch: pytest.MonkeyPatch, data: bytes, message: str
) -> None:
    stdin_holding(monkeypatch, data)
    with pytest.raises(PromptsFileError) as caught:
        read_timed_prompts(STDIN)
    assert str(caught.value).startswith(message), caught.value


def test_a_closed_stdin_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(PromptsFileError, match=r"^cannot read prompts from standard input: "):
        read_timed_prompts(STDIN)


def test_only_a_bare_dash_is_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``./-`` is a file named ``-``, as for ``cat``; ``Path`` alone would make it ``-``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_text('{"prompt": "from the file"}\n')
    stdin_holding(monkeypatch, b'{"prompt": "from stdin"}\n')
    dash = parse_own_args(["--prompts", "-"])[0]
    dot_dash = parse_own_args(["--prompts", "./-"])[0]
    assert dash.prompts_on_stdin and not dot_dash.prompts_on_stdin
    assert dot_dash.prompts == tmp_path / "-"
    assert dash.prompts is not None and dot_dash.prompts is not None
    assert read_timed_prompts(dash.prompts)[0][1].prompt == "from stdin"
    assert read_timed_prompts(dot_dash.prompts)[0][1].prompt == "from the file"
    assert parse_own_args(["--prompts", "p.jsonl"])[0].prompts == Path("p.jsonl")
