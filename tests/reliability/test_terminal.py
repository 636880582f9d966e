"""The TUI without a terminal on stdin, stdout or stderr (issue 13, case 2).

``echo | stepview`` or ``stepview < /dev/null`` drew the TUI but read no keys, with two
threads spinning at full CPU; ``stepview > out.txt`` drew on the terminal while the user
meant to keep the output. Now keys come from the controlling terminal when stdin is not
one, a run without any terminal is refused in one line pointing at ``--headless``, and so is
redirected output.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from stepview.ui.bindings import NEWCOMER_HINT
from tests.e2e.conftest import OpenTerminal
from tests.e2e.terminal import (
    QUIT_WITHIN_S,
    STARTUP_S,
    STEPVIEW,
    alive,
    command_env,
    process_tree,
    wait_gone,
)
from tests.helpers import DATA
from tests.reliability.test_cli_errors import assert_one_line_error

TRACE = DATA / "replay.trace.jsonl"
_SGR = re.compile(r"\x1b\[([0-9;:]*)m")
# SGR parameters that set a colour (30-37, 38, 40-47, 48, 90-97, 100-107); 39 and 49 reset.
_COLOUR = re.compile(r"^(3[0-8]|4[0-8]|9[0-7]|10[0-7])$")


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
    screen = term.text()
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
    ``q`` quits, exit 0) and the idle app does not spin. The first screen, before any
    request, says what to press."""
    term = open_terminal(80, 24)
    log = str(tmp_path / "log.txt")
    term.type(f"{STEPVIEW} --log-file {log} --results r.jsonl < /dev/null; echo EXIT=$?")
    term.keys("Enter")
    stepview = term.command_process()
    first = term.wait_for(lambda s: "Running 0" in s and "IDLE" in s, timeout=STARTUP_S)
    assert NEWCOMER_HINT in first  # the first screen says what to do (issue 13, case 11)
    tree = process_tree(stepview)
    term.keys("d")
    term.wait_for(lambda s: "Finished 3" in s and "IDLE" in s, timeout=60)  # d was read
    # Idle once the run's last frames are drawn, however long a busy machine takes to draw
    # them: a window of two seconds comes in which the app used under half a core. An app
    # that spins (it was two threads at ~100 % each) never has one.
    process = psutil.Process(stepview.pid)
    deadline = time.monotonic() + 60
    process.cpu_percent(None)
    time.sleep(2.0)  # the window measured: the app's CPU over two seconds
    while (used := process.cpu_percent(None)) >= 50:
        assert time.monotonic() < deadline, f"the idle app still uses {used:.0f} % of a core"
        time.sleep(2.0)  # the next window
    term.keys("q")
    wait_gone(stepview, timeout=QUIT_WITHIN_S)
    assert term.wait_for_exit(timeout=15) == 0
    assert alive(tree) == []
    assert term.flag("alternate_on") == "0"


def reversed_row(screen: str) -> bool:
    """Some text in ``screen`` (``capture-pane -e``) is drawn in reverse video."""
    return "\x1b[7m" in screen or ";7m" in screen or "[7;" in screen


def colour_codes(screen: str) -> set[str]:
    """Every colour-setting SGR parameter in ``screen`` (tmux's ``capture-pane -e``)."""
    found: set[str] = set()
    for match in _SGR.finditer(screen):
        params = match.group(1).replace(":", ";").split(";")
        found.update(p for p in params if _COLOUR.match(p))
    return found


@pytest.mark.e2e
@pytest.mark.parametrize(
    "env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}], ids=["no-color", "term-dumb"]
)
def test_without_colour_the_screen_is_readable(
    env: dict[str, str], open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    """NO_COLOR=1 drew black text on a black background (Textual's monochrome filter over
    the ANSI theme); TERM=dumb got colour codes anyway. Both now draw in the terminal's own
    colours: no colour code at all, text, focus (heavy border) and cursor (reverse) kept."""
    term = open_terminal(100, 24)
    # Set on the command itself: tmux gives the shell its own TERM.
    assignments = [f"{name}={value}" for name, value in env.items()]
    log = str(tmp_path / "log.txt")
    term.run(["env", *assignments, STEPVIEW, "--log-file", log, "--replay", str(TRACE)])
    term.wait_for(lambda s: "STOPPED" in s and "Finished 6" in s, timeout=30)
    term.keys("Tab")  # the Finished pane: its cursor row is drawn in reverse
    deadline = time.monotonic() + 10
    while not reversed_row(screen := term.tmux("capture-pane", "-p", "-e", "-t", "main")):
        assert time.monotonic() < deadline, "no row drawn in reverse"
        time.sleep(0.05)
    assert colour_codes(screen) == set(), sorted(colour_codes(screen))
    assert reversed_row(screen)  # the cursor row
    text = term.screen()
    assert "A robot may not injure a" in text and "REPLAY" in text
    term.keys("q")
    assert term.wait_for_exit(timeout=30) == 0
