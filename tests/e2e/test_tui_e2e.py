"""Issue 3 end to end: a person types a prompt into the real ``stepview`` and quits.

The installed ``stepview`` command runs real vLLM on the demo model in tmux at 80x24. The
test only presses keys and reads the screen, like a person: ``a`` opens the form, the prompt
is typed, tab moves to ``max_tokens``, ``ctrl+s`` submits, the request shows up in the
Finished pane, ``q`` quits. Then the shell has its prompt back, the exit code is 0 and no
process of the run is left.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stepview.model.sampling import FORM_FIELDS
from stepview.ui.dialogs.presets import PRESETS
from tests.e2e.conftest import OpenTerminal
from tests.e2e.terminal import (
    PROMPT,
    QUIT_WITHIN_S,
    STARTUP_S,
    STEPVIEW,
    Terminal,
    alive,
    process_tree,
    wait_gone,
)

PROMPT_TEXT = "hello from tmux"


def field_value(screen: str, name: str) -> str | None:
    """The text in the form's field ``name`` (drawn between two bars), if it is on screen."""
    match = re.search(rf"\b{name}\s+▏([^▕]*)▕", screen)
    return match.group(1).strip() if match else None


def field_row(screen: str, name: str) -> int | None:
    """The row of the form's field ``name``, if it is on screen."""
    rows = screen.splitlines()
    return next((i for i, row in enumerate(rows) if re.search(rf"\b{name}\s+▏", row)), None)


def tab_to_field(term: Terminal, name: str, tabs: int) -> None:
    """Press Tab ``tabs`` times as a person does, then see the focus in field ``name``.

    Textual puts the terminal's cursor in the focused field, so the cursor's row says where the
    focus is. On a loaded machine a Tab can be read before the one before it has moved the
    focus, and the two move it once: the focus is then walked on, one key at a time, each once
    the one before has shown (a person corrects by looking, never by counting again).
    """
    term.press(*["Tab"] * tabs)

    def focused(screen: str) -> bool:
        return field_row(screen, name) == term.cursor_row()

    for _ in range(tabs):
        try:
            term.wait_for(focused, timeout=5)
            return
        except AssertionError:
            row = field_row(term.screen(), name)
            term.keys("Tab" if row is None or term.cursor_row() < row else "BTab")
    term.wait_for(focused, timeout=5)


@pytest.mark.e2e
@pytest.mark.engine
def test_prompt_typed_into_the_form_finishes_and_q_exits_cleanly(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    term = open_terminal(80, 24)
    term.run([STEPVIEW, "--results", str(results), "--log-file", str(tmp_path / "log.txt")])
    stepview = term.command_process()
    # The panes replace the loading view once the engine is up.
    term.wait_for(lambda s: "Running 0" in s and "IDLE" in s, timeout=STARTUP_S)
    tree = process_tree(stepview)

    term.keys("a")
    term.wait_for_text("Add a prompt", timeout=10)
    term.type(PROMPT_TEXT)  # the prompt box has the focus
    # Tab from the prompt over the chat switch (on: the tiny model has a chat template), the
    # preset buttons and the fields before max_tokens; the field's text is selected on focus,
    # so typing replaces the default.
    tab_to_field(term, "max_tokens", 1 + len(PRESETS) + FORM_FIELDS.index("max_tokens") + 1)
    term.type("3")
    form = term.wait_for(lambda s: field_value(s, "max_tokens") == "3", timeout=10)
    assert PROMPT_TEXT in form
    term.keys("C-s")

    finished = term.wait_for(lambda s: "Finished 1" in s and "length" in s, timeout=30)
    assert "Add a prompt" not in finished
    row = next(line for line in finished.splitlines() if line.startswith("u1 "))
    assert PROMPT_TEXT in row and "length" in row

    term.keys("q")
    wait_gone(stepview, timeout=QUIT_WITHIN_S)  # fails if it takes longer
    assert term.wait_for_exit(timeout=15) == 0
    assert alive(tree) == []
    assert term.shell().children() == []
    screen = term.screen()
    assert screen.rstrip().endswith(PROMPT.rstrip())  # the shell is back, nothing drawn over it
    assert "Finished" not in screen
    assert term.flag("alternate_on") == "0" and term.flag("mouse_any_flag") == "0"

    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert record["prompt"] == PROMPT_TEXT
    assert record["state"] == "finished"
    assert len(record["completions"][0]["token_ids"]) == 3
