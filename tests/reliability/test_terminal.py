"""The TUI without a terminal on stdin, stdout or stderr (issue 13, case 2).

``echo | stepview`` or ``stepview < /dev/null`` drew the TUI but read no keys, with two
threads spinning at full CPU; ``stepview > out.txt`` drew on the terminal while the user
meant to keep the output. Now keys come from the controlling terminal when stdin is not
one, a run without any terminal is refused in one line pointing at ``--headless``, and so is
redirected output.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.e2e.conftest import OpenTerminal
from tests.e2e.terminal import STEPVIEW, alive, command_env, process_tree, wait_gone
from tests.reliability.test_cli_errors import assert_one_line_error

TRACE = Path(__file__).resolve().parents[1] / "data" / "replay.trace.jsonl"


def run_without_terminal(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``stepview`` in a new session (no controlling terminal), stdin from /dev/null."""
    return subprocess.run(
        [STEPVIEW, "--log-file", str(tmp_path / "log.txt"), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=command_env(),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


@pytest.mark.parametrize("args", [[], ["--replay", str(TRACE)]], ids=["live", "replay"])
def test_no_terminal_at_all_is_refused_in_one_line(args: list[str], tmp_path: Path) -> None:
    done = run_without_terminal(args, tmp_path)
    line = assert_one_line_error(
        done, "stdin is not a terminal and there is no terminal to read keys from"
    )
    assert line.endswith("; use --headless to run without the TUI") == (args == [])


@pytest.mark.e2e
def test_output_redirected_away_from_the_terminal_is_refused(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    """``stepview > out.txt``: the user meant to keep the output; the TUI writes none there.
    Refused before anything starts (no engine), the file stays empty; the same for stderr."""
    term = open_terminal(220, 24)
    log = str(tmp_path / "log.txt")
    term.type(f"{STEPVIEW} --log-file {log} > out.txt; echo EXIT=$?")
    term.keys("Enter")
    assert term.wait_for_exit(timeout=30) == 2
    screen = term.screen().replace("\n", "")
    assert "stepview: stdout is not a terminal (redirected to a file or a pipe)" in screen
    assert "; use --headless to run without the TUI" in screen
    assert (tmp_path / "out.txt").read_text() == ""
    term.keys("C-l")
    term.type(f"{STEPVIEW} --log-file {log} --replay {TRACE} 2> err.txt; echo EXIT=$?")
    term.keys("Enter")
    assert term.wait_for_exit(timeout=30) == 2
    message = (tmp_path / "err.txt").read_text()
    assert message.startswith("stepview: stderr is not a terminal") and message.count("\n") == 1
    assert term.flag("alternate_on") == "0"


@pytest.mark.e2e
@pytest.mark.engine
def test_stdin_from_dev_null_reads_keys_from_the_terminal(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    """``stepview < /dev/null`` in a terminal: the keys work (``d`` runs the demo prompts,
    ``q`` quits, exit 0) and the idle app does not spin."""
    term = open_terminal(80, 24)
    log = str(tmp_path / "log.txt")
    term.type(f"{STEPVIEW} --log-file {log} --results r.jsonl < /dev/null; echo EXIT=$?")
    term.keys("Enter")
    stepview = term.command_process()
    term.wait_for(lambda s: "Running 0" in s and "IDLE" in s, timeout=120)
    tree = process_tree(stepview)
    term.keys("d")
    term.wait_for(lambda s: "Finished 3" in s and "IDLE" in s, timeout=60)  # d was read
    time.sleep(1.0)
    process = psutil.Process(stepview.pid)
    process.cpu_percent(None)
    time.sleep(2.0)
    assert process.cpu_percent(None) < 50  # was two threads at ~100 % each
    term.keys("q")
    wait_gone(stepview, timeout=10)
    assert term.wait_for_exit(timeout=5) == 0
    assert alive(tree) == []
    assert term.flag("alternate_on") == "0"
