"""``--prompts -``: the prompts come on standard input in headless runs, and the TUI refuses.

The real command in a subprocess, as a user's pipe would run it. Every run here ends before
``import vllm`` (a refusal, or a bad line judged before the engine starts), so none costs an
engine; the run that goes all the way is in ``test_headless.py``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.terminal import STEPVIEW, command_env
from tests.reliability.test_cli_errors import assert_one_line_error

REFUSAL = "stepview: --prompts - reads standard input, which the TUI needs for keys"
ATTACH = ["--attach", "tcp://127.0.0.1:5999", "--api", "http://127.0.0.1:8000"]


def piped(args: list[str], tmp_path: Path, stdin: str) -> subprocess.CompletedProcess[str]:
    """``printf STDIN | stepview ARGS``."""
    return subprocess.run(
        [STEPVIEW, "--log-file", str(tmp_path / "log.txt"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        env=command_env(),
        cwd=tmp_path,
    )


@pytest.mark.parametrize("mode", [[], ATTACH], ids=["tui", "attached-tui"])
def test_the_tui_refuses_prompts_on_stdin_before_anything_starts(
    mode: list[str], tmp_path: Path
) -> None:
    """Its keys come in on standard input: one line says so, and what to do instead."""
    done = piped([*mode, "--prompts", "-"], tmp_path, '{"prompt": "a"}\n')
    line = assert_one_line_error(done, REFUSAL)
    assert line.endswith("use --headless, or give a file")


@pytest.mark.parametrize("mode", [["--headless"], [*ATTACH, "--headless"]], ids=["own", "attached"])
def test_a_bad_line_on_stdin_is_named_by_its_number_before_the_engine_starts(
    mode: list[str], tmp_path: Path
) -> None:
    stdin = '{"prompt": "fine"}\n# a comment\n{"prompt": "hot", "params": {"temperature": 7}}\n'
    done = piped([*mode, "--prompts", "-"], tmp_path, stdin)
    assert_one_line_error(done, "<stdin>:3: temperature must be in [0, 2], got 7.0.")
    done = piped([*mode, "--prompts", "-"], tmp_path, "")
    assert_one_line_error(done, "<stdin>: no prompts in the input")
