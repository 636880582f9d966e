"""An engine that does not answer (issue 18, item 5), and no engine process left behind.

With the engine core in its own process (``VLLM_ENABLE_V1_MULTIPROCESSING=1``), the test
stops that process mid-run (``kill -STOP``, as a hung core would behave) and then asks
stepview to quit: ``q`` and Ctrl+C in the TUI, SIGTERM in the TUI and headless. stepview
must be gone within 5 s, with every request in the results file (finished, or
``unfinished``), an exit line naming the processes it killed, exit code 1, and no process
of the run left. The in-process engine must leave no helper process either after SIGTERM
mid-run (after a normal end: ``tests/launch/test_headless``). Every process the run ever had
is collected while it runs (:class:`~tests.reliability.process_watch.ProcessWatch`), so a
helper that came and went is checked too.

Each test on real vLLM pays an engine start (~60 s here with the core in its own process: the
core and its worker import vLLM again). The TUI's ``q`` and the headless SIGTERM keep real
vLLM; Ctrl+C and SIGTERM in the TUI, which reach the same give-up once the quit is asked
(and are each tested on real vLLM, with a core that answers, in ``tests/e2e/test_signals``),
run on a stand-in core whose processes, step and shutdown behave as vLLM's do
(``tests/reliability/fake_core.py`` says how).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.e2e.conftest import (
    HELD,
    HELD_RUN,
    HOLD_AT,
    OpenTerminal,
    write_held_run,
)
from tests.e2e.terminal import (
    PROMPT,
    QUIT_WITHIN_S,
    STARTUP_S,
    Terminal,
    command_env,
    wait_gone,
)
from tests.e2e.test_signals import mid_run, shown_finished
from tests.reliability.launcher import LAUNCHER
from tests.reliability.process_watch import Watch, left_behind, watch

__all__ = ["watch"]

KILLED_GONE_S = 20.0
"""How long a process stepview SIGKILLed may take to be gone: what is asserted is that none
stays, not how soon a busy kernel runs its exit (beside two busy loops and another engine
test, a worker was still 'running' 5 s after stepview had left)."""
MULTIPROCESS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
IN_PROCESS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def descendant_named(root: psutil.Process, name: str, timeout: float = 120) -> psutil.Process:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in root.children(recursive=True):
            try:
                if child.name() == name:
                    return child
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.05)
    raise AssertionError(f"no {name} process under {root.pid} after {timeout}s")


def stop_process(process: psutil.Process) -> None:
    """``kill -STOP``, and wait until the kernel says it is stopped."""
    os.kill(process.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while process.status() != psutil.STATUS_STOPPED:
        assert time.monotonic() < deadline, process.status()
        time.sleep(0.01)


def results_of(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def assert_every_request_recorded(results: Path, finished_before: set[str]) -> list[str]:
    """All requests in the file, the finished ones first, the rest unfinished; the ids of
    those unfinished."""
    saved = results_of(results)
    assert len(saved) == HELD_RUN and len({r["id"] for r in saved}) == HELD_RUN
    done = [r for r in saved if r["state"] != "unfinished"]
    assert {r["state"] for r in done} <= {"finished"}
    assert finished_before <= {str(r["id"]) for r in done}
    rest = saved[len(done) :]
    assert rest, "every request finished before the core was stopped: too little work"
    assert all(r["state"] == "unfinished" for r in rest)
    return [str(r["id"]) for r in rest]


def assert_killed_line(text: str, core: psutil.Process) -> None:
    match = re.search(
        r"stepview: the engine did not stop in time; its process(es)? (.*?) (was|were) killed", text
    )
    assert match is not None, text
    assert f"{core.pid} (VLLM::EngineCore)" in match.group(2)


# -- headless -------------------------------------------------------------------------------


def start_headless(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    """stepview headless on a run held mid-way until it is asked to stop (:data:`HELD`)."""
    results = tmp_path / "results.jsonl"
    workload = write_held_run(tmp_path / "workload.jsonl")
    argv = [*HELD, "--headless", "--json", "--prompts", str(workload), "--results", str(results)]
    proc = subprocess.Popen(
        [*argv, "--log-file", str(tmp_path / "log.txt")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=command_env(env),
        cwd=tmp_path,
        # A background job of a non-interactive shell starts with SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    return proc, results


@pytest.mark.engine
def test_headless_sigterm_with_the_engine_core_stopped(tmp_path: Path, watch: Watch) -> None:
    proc, results = start_headless(tmp_path, MULTIPROCESS)
    stepview = psutil.Process(proc.pid)
    run = watch(stepview)
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())  # the first request finished: mid-run now
    core = descendant_named(stepview, "VLLM::EngineCore")
    engine = [core, *core.children(recursive=True)]
    stop_process(core)
    proc.send_signal(signal.SIGTERM)
    took = wait_gone(stepview, timeout=QUIT_WITHIN_S)
    out, err = proc.communicate(timeout=5)
    assert proc.returncode == 1, err
    # SIGKILLed by stepview as it quit: the kernel takes them down when it next runs them.
    assert left_behind(engine, timeout=KILLED_GONE_S) == []
    assert left_behind(run.close()) == []
    printed = [first["id"], *(json.loads(line)["id"] for line in out.splitlines())]
    unfinished = assert_every_request_recorded(results, set(printed))
    assert f"interrupted; requests that finished were printed ({len(unfinished)} unfinished" in err
    assert_killed_line(err, core)
    assert "Traceback" not in err
    print(f"headless quit took {took:.2f}s")


@pytest.mark.engine
def test_in_process_engine_leaves_no_helper_after_sigterm_mid_run(
    tmp_path: Path, watch: Watch
) -> None:
    proc, results = start_headless(tmp_path, IN_PROCESS)
    stepview = psutil.Process(proc.pid)
    run = watch(stepview)
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())
    proc.send_signal(signal.SIGTERM)
    wait_gone(stepview, timeout=QUIT_WITHIN_S)
    out, err = proc.communicate(timeout=5)
    assert proc.returncode == 1 and "interrupted" in err, err
    assert "did not stop in time" not in err
    assert left_behind(run.close()) == []
    # Every printed line is whole JSON, in the order the results file has them.
    printed = [first["id"], *(json.loads(line)["id"] for line in out.splitlines())]
    unfinished = assert_every_request_recorded(results, set(printed))
    assert [r["id"] for r in results_of(results)][: len(printed)] == printed
    assert f"({len(unfinished)} unfinished requests, recorded in {results})" in err
    # Promptly: it stopped in the middle of requests under way, not after finishing them.
    saved = {str(r["id"]): r for r in results_of(results)}
    assert any(_generated(saved[one]) for one in unfinished)


def _generated(record: dict[str, object]) -> bool:
    """Whether a results record has any generated token."""
    completions = record["completions"]
    assert isinstance(completions, list)
    return any(c["token_ids"] for c in completions)


# -- the TUI --------------------------------------------------------------------------------


FAKE_HELD = [*LAUNCHER, "fake-core", "+", "hold-at", str(HOLD_AT), "--"]
""":data:`HELD` on the stand-in engine core (``tests/reliability/fake_core.py``)."""


def start_tui(term: Terminal, tmp_path: Path, command: list[str]) -> Path:
    results = tmp_path / "results.jsonl"
    workload = write_held_run(tmp_path / "workload.jsonl")
    argv = [*command, "--prompts", str(workload), "--results", str(results)]
    term.run([*argv, "--log-file", str(tmp_path / "log.txt")])
    return results


def tui_with_the_core_stopped(
    open_terminal: OpenTerminal, tmp_path: Path, watch: Watch, quit_with: str, command: list[str]
) -> None:
    term = open_terminal(80, 24, env=MULTIPROCESS)
    results = start_tui(term, tmp_path, command)
    stepview = term.command_process()
    run = watch(stepview)
    _, finished_ids = shown_finished(term.wait_for(mid_run, timeout=STARTUP_S))
    core = descendant_named(stepview, "VLLM::EngineCore")
    engine = [core, *core.children(recursive=True)]
    stop_process(core)
    if quit_with == "sigterm":
        stepview.send_signal(signal.SIGTERM)
    else:
        term.keys(quit_with)
    took = wait_gone(stepview, timeout=QUIT_WITHIN_S)
    # SIGKILLed by stepview as it quit: the kernel takes them down when it next runs them.
    assert left_behind(engine, timeout=KILLED_GONE_S) == []
    # The run was held before a step; the quit let that step go to the stopped core, where it
    # blocks as a step on a hung core does: stepview gives up on it and kills the core.
    assert term.wait_for_exit(timeout=15) == 1
    screen = term.text()
    assert_killed_line(screen, core)
    unfinished = assert_every_request_recorded(results, finished_ids)
    assert (
        f"stepview: finished requests saved in {results} "
        f"({len(unfinished)} unfinished requests recorded there too)"
    ) in screen
    assert term.flag("alternate_on") == "0"
    assert left_behind(run.close()) == []
    # The resource tracker warned about the killed core's semaphores as it left: in the log.
    after = term.screen()
    assert after.rstrip().endswith(PROMPT.rstrip()) and "Warning" not in after, after
    print(f"TUI quit ({quit_with}) took {took:.2f}s")


@pytest.mark.e2e
@pytest.mark.engine
def test_tui_q_with_the_engine_core_stopped(
    open_terminal: OpenTerminal, tmp_path: Path, watch: Watch
) -> None:
    """The TUI's way out past a stopped core on real vLLM; the other ways out reach the same
    code after the quit (``Driver.stop``, then the give-up), and ``tests/e2e/test_signals``
    has each of them on real vLLM with a core that answers."""
    tui_with_the_core_stopped(open_terminal, tmp_path, watch, "q", HELD)


@pytest.mark.e2e
def test_tui_ctrl_c_with_the_engine_core_stopped(
    open_terminal: OpenTerminal, tmp_path: Path, watch: Watch
) -> None:
    tui_with_the_core_stopped(open_terminal, tmp_path, watch, "C-c", FAKE_HELD)


@pytest.mark.e2e
def test_tui_sigterm_with_the_engine_core_stopped(
    open_terminal: OpenTerminal, tmp_path: Path, watch: Watch
) -> None:
    tui_with_the_core_stopped(open_terminal, tmp_path, watch, "sigterm", FAKE_HELD)
