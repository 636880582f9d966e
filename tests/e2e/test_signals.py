"""Ctrl+C, SIGTERM, a hang-up and a resize, on the real ``stepview`` with real vLLM, in tmux.

Each test interrupts a run held mid-way (requests finished, others running: the launcher
holds the run before a step until the quit reaches the driver, however slow the machine or
its screen), then checks what a user would care about: the process is gone within 5 s (no
thread or child process can outlive it), every request the screen showed as finished is in
the results file, and the terminal is back as it was (shell prompt, no alternate screen, no
mouse reporting).
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from stepview.model.snapshot import EngineState
from stepview.trace.reader import load_trace
from tests.e2e.conftest import HELD, HELD_RUN, PACED, OpenTerminal, write_held_run
from tests.e2e.terminal import (
    PROMPT,
    QUIT_WITHIN_S,
    STARTUP_S,
    Terminal,
    alive,
    process_tree,
    wait_gone,
)
from tests.reliability.launcher import LAUNCHER

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

_FINISHED = re.compile(r"Finished (\d+)")
_ROW_ID = re.compile(r"^(r\d+)\s")


def shown_finished(screen: str) -> tuple[int, set[str]]:
    """The Finished pane's count and the ids of its rows on screen."""
    match = _FINISHED.search(screen)
    assert match is not None, screen
    pane = screen[match.end() :].splitlines()
    ids = {m.group(1) for line in pane if (m := _ROW_ID.match(line))}
    return int(match.group(1)), ids


def mid_run(screen: str) -> bool:
    """Some requests finished, others still running."""
    match = _FINISHED.search(screen)
    return match is not None and int(match.group(1)) >= 3 and "RUNNING" in screen


def results_of(path: Path) -> dict[str, dict[str, object]]:
    """Every line of the results file, which must all be whole JSON, by request id."""
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def start_run(term: Terminal, tmp_path: Path, *extra: str, held: bool = True) -> Path:
    """stepview in ``term`` on a run held mid-way (:data:`HELD`), or, not ``held``, on the
    same run paced to keep stepping for minutes (:data:`PACED`); the path of its results
    file."""
    results = tmp_path / "results.jsonl"
    workload = write_held_run(tmp_path / "workload.jsonl")
    term.run(
        [
            *(HELD if held else PACED),
            "--prompts",
            str(workload),
            "--results",
            str(results),
            "--log-file",
            str(tmp_path / "log.txt"),
            *extra,
        ]
    )
    return results


def assert_terminal_restored(term: Terminal) -> None:
    screen = term.screen()
    assert screen.rstrip().endswith(PROMPT.rstrip()), screen
    assert "Pending" not in screen and "Running" not in screen, screen
    assert term.flag("alternate_on") == "0"
    assert term.flag("mouse_any_flag") == "0"
    assert term.flag("cursor_flag") == "1"


def interrupt_mid_run(open_terminal: OpenTerminal, tmp_path: Path, interrupt: str) -> None:
    term = open_terminal(80, 24)
    results = start_run(term, tmp_path)
    stepview = term.command_process()
    before = term.wait_for(mid_run, timeout=STARTUP_S)
    tree = process_tree(stepview)
    count, ids = shown_finished(before)
    if interrupt == "ctrl+c":
        term.keys("C-c")
    else:
        stepview.send_signal(signal.SIGTERM)
    wait_gone(stepview, timeout=QUIT_WITHIN_S)  # fails if it takes longer
    assert alive(tree) == []
    assert term.wait_for_exit(timeout=15) == 0
    assert_terminal_restored(term)
    screen = term.text()
    assert f"stepview: finished requests saved in {results}" in screen
    saved = results_of(results)
    # Issue 13: the requests still to go are in the file too, as unfinished, after the rest.
    finished = {rid: r for rid, r in saved.items() if r["state"] != "unfinished"}
    assert ids and ids <= set(finished)
    assert len(finished) >= count
    assert len(finished) < HELD_RUN  # it really was interrupted mid-run
    assert len(saved) == HELD_RUN and list(saved)[: len(finished)] == list(finished)
    assert f"({HELD_RUN - len(finished)} unfinished requests recorded there too)" in screen


def test_ctrl_c_mid_run_quits_within_5s_keeping_every_result(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    interrupt_mid_run(open_terminal, tmp_path, "ctrl+c")


def test_sigterm_mid_run_quits_within_5s_keeping_every_result(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    interrupt_mid_run(open_terminal, tmp_path, "sigterm")


def test_hang_up_keeps_the_trace_and_results_intact(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    """A dropped ssh connection: tmux kills the session, stepview gets SIGHUP (and SIGCONT)."""
    term = open_terminal(80, 24)
    trace_path = tmp_path / "run.trace.jsonl"
    results = start_run(term, tmp_path, "--record", str(trace_path))
    stepview = term.command_process()
    before = term.wait_for(mid_run, timeout=STARTUP_S)
    tree = process_tree(stepview)
    count, ids = shown_finished(before)
    term.hang_up()
    # The kernel sends a hung-up foreground group SIGCONT with the SIGHUP; sent again here so
    # that the race it starts (Textual resuming onto a terminal that is gone: ui/terminal_driver.py)
    # is run every time, not one run in five.
    stepview.send_signal(signal.SIGCONT)
    wait_gone(stepview, timeout=QUIT_WITHIN_S)
    assert alive(tree) == []

    trace = load_trace(trace_path)
    assert trace.warning is None  # stopped cleanly: not even the step in flight is cut
    last = trace.snapshots[-1]
    assert last.engine_state is EngineState.STOPPED
    finished_in_trace = [view.request_id for view in last.finished]
    saved = results_of(results)
    assert list(saved) == finished_in_trace
    assert ids <= set(saved) and len(saved) >= count
    assert "run summary" in (tmp_path / "log.txt").read_text()


def test_resize_and_user_signals_mid_run_keep_it_drawing_and_answering(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    """A resize mid-run: the layout redrawn at the new size, new steps drawn, keys answered.
    Then SIGUSR2 (tools send it to reopen logs) and SIGUSR1 without a recorder: each ended the
    TUI before (SIGUSR2 always); now a toast says why nothing happens, and the run stays.
    One run for both (one engine start): neither leaves a mark the other could miss."""
    term = open_terminal(200, 60)
    start_run(term, tmp_path, held=False)  # steps must go on: it redraws new ones
    stepview = term.command_process()
    wide = term.wait_for(mid_run, timeout=STARTUP_S)
    assert len(wide.splitlines()[0].rstrip()) > 150  # the status bar spans the width

    term.resize(80, 24)
    # tmux keeps the bottom 24 lines of the old 60-line screen until the app redraws, old
    # footer included: wait for the redrawn layout, not just for a footer at the bottom.
    narrow = term.wait_for(
        lambda s: (
            len(s.splitlines()) == 24
            and "q Quit" in s.splitlines()[-1]
            and "stepview" in s.splitlines()[0]
            and "Pending" in s
        )
    )
    assert all(len(line) <= 80 for line in narrow.splitlines())
    assert "Pending" in narrow and "Running" in narrow and "Finished" in narrow
    step = step_of(narrow)
    term.wait_for(lambda s: step_of(s) > step, timeout=10)  # still drawing new steps
    term.keys("?")
    term.wait_for_text("Keys", timeout=30)  # and still answering keys
    term.keys("Escape")
    term.wait_for(lambda s: "Keys" not in s, timeout=30)

    term.resize(200, 60)
    term.wait_for(lambda s: len(s.splitlines()[0].rstrip()) > 150, timeout=10)

    stepview.send_signal(signal.SIGUSR2)
    term.wait_for_text("SIGUSR2: stepview takes no such", timeout=30)
    stepview.send_signal(signal.SIGUSR1)
    term.wait_for_text("No flight recorder", timeout=30)
    assert stepview.is_running() and mid_run(term.screen())
    term.keys("q")
    wait_gone(stepview, timeout=QUIT_WITHIN_S)
    assert term.wait_for_exit(timeout=15) == 0
    assert_terminal_restored(term)


def step_of(screen: str) -> int:
    match = re.search(r"step (\d+)", screen.splitlines()[0])
    return int(match.group(1)) if match else -1


def test_q_while_the_engine_is_being_built_leaves_at_once_recording_the_requests(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    """A quit in start-up (the loading view; ``import vllm`` or the built-in model's build,
    which nothing interrupts) waited 4 s for the engine and ended "the engine did not stop in
    time", exit 1. Nothing ran: it leaves at once, exit 0, the requests sent meanwhile in the
    results file as unfinished, the process the build had started ended."""
    term = open_terminal(100, 30)
    results = tmp_path / "results.jsonl"
    workload = write_held_run(tmp_path / "workload.jsonl")
    term.run(
        [
            *(*LAUNCHER, "stuck-in-start-up", "-", "--"),
            *("--prompts", str(workload), "--results", str(results)),
            *("--log-file", str(tmp_path / "log.txt")),
        ]
    )
    stepview = term.command_process()
    building = term.wait_for(lambda _: len(stepview.children()) > 0, timeout=STARTUP_S)
    assert "STARTING" in building, building
    tree = process_tree(stepview)
    term.keys("q")
    wait_gone(stepview, timeout=QUIT_WITHIN_S)
    assert term.wait_for_exit(timeout=15) == 0
    assert alive(tree) == []  # the build's child process too
    screen = term.text()
    assert "stepview: stopped during the engine's start-up" in screen
    assert f"({HELD_RUN} unfinished requests recorded there too)" in screen
    assert "did not stop in time" not in screen
    assert {r["state"] for r in results_of(results).values()} == {"unfinished"}
    assert_terminal_restored(term)
