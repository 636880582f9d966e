"""Signals before a mode answers them (start-up, the built-in model's build) and after the
run (its results being written) never end stepview without a word (issue 31).

Operators send ``SIGUSR1`` for a flight recording, often to a unit systemd has just restarted.
Its default action ends the process: before stepview answered it from its first line, a
headless run signalled while vLLM was imported died with exit 138, nothing printed or saved.
``SIGUSR2`` (sent by tools to reopen logs) ended it at any moment. ``SIGTERM`` and ``SIGHUP``
in start-up ended it silently (exit 143 and 129, no line in the journal, a conversion's folder
half built), and after the run they could cut the writing of its exports. The launcher sends
the signals from inside each moment (``signals-in-start-up``, ``signal-in-build``,
``signals-in-finish``), so the tests hold that moment instead of racing it.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from stepview.launch.signals_between import (
    AGAIN_TO_LEAVE,
    NO_RECORDER,
    STARTING,
    STOPPING,
    STOPPING_ALREADY,
    USR2,
    answer,
)
from tests.e2e.conftest import write_workload
from tests.e2e.terminal import command_env, gone
from tests.reliability.launcher import LAUNCHER


def default_signals() -> None:
    """In the child, before it runs: every signal these tests send at its default action. A
    test run started under ``nohup`` (or as a script's background job) passes SIGHUP (SIGINT)
    on ignored, and stepview rightly keeps a signal ignored that it was started ignoring."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)


def launch(
    fault: list[str], args: list[str], tmp_path: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real command with ``fault`` injected, headless, its log in ``tmp_path``."""
    return subprocess.run(
        [*LAUNCHER, *fault, "--", "--headless", *args, "--log-file", str(tmp_path / "log.txt")],
        capture_output=True,
        text=True,
        timeout=280,
        env=command_env(env),
        stdin=subprocess.DEVNULL,
        preexec_fn=default_signals,
    )


USER_SIGNALS_IN_START_UP = ["signals-in-start-up", "USR1", "USR2", "USR1", "USR2", "+"]
"""Two of each user signal while vLLM's flags are about to be parsed; a run's other fault
follows (``+``): each run holds two moments, for one engine start."""


def assert_user_signals_answered_once(stderr: str, recorder: bool) -> None:
    """Two signals of each kind in start-up, one line for each kind: the run went on."""
    said = f"stepview: {STARTING if recorder else NO_RECORDER}\n"
    assert stderr.count(said) == 1, stderr  # two signals, one line
    assert stderr.count(f"stepview: {USR2}\n") == 1, stderr


def assert_whole_results(results: Path) -> None:
    saved = [json.loads(line) for line in results.read_text().splitlines()]
    assert [r["id"] for r in saved] == ["r0", "r1", "r2"]
    assert {r["state"] for r in saved} == {"finished"}


def test_the_answer_says_why_for_each_moment() -> None:
    assert answer("starting", None) == STARTING  # before the flags are parsed
    assert answer("starting", True) == STARTING
    assert answer("stopping", True) == STOPPING
    assert answer("starting", False) == answer("stopping", False) == NO_RECORDER


@pytest.mark.engine
@pytest.mark.parametrize(("name", "code"), [("TERM", 143), ("HUP", 129)])
def test_a_stop_signal_in_start_up_ends_it_in_one_line(
    tmp_path: Path, name: str, code: int
) -> None:
    """systemd's stop or a closed ssh session while vLLM is imported: the way Ctrl+C ends
    start-up, with the signal named and the exit code a shell gives a process it ended."""
    workload = write_workload(tmp_path / "workload.jsonl", 3, longest=16)
    done = launch(["signals-in-start-up", name], ["--prompts", str(workload)], tmp_path)
    assert done.returncode == code, done.stderr
    assert done.stderr == f"stepview: stopped by SIG{name} during start-up\n"
    assert done.stdout == ""


@pytest.mark.engine
def test_sigterm_in_the_models_build_leaves_no_half_built_folder(tmp_path: Path) -> None:
    """The built-in model's build, stopped half way: its temporary folder goes with it (the
    next run would clear it anyway, but a unit that is never started again would keep it)."""
    cache = tmp_path / "cache"
    done = launch(["signal-in-build", "TERM"], [], tmp_path, {"XDG_CACHE_HOME": str(cache)})
    assert done.returncode == 143, done.stderr
    assert done.stderr == "stepview: stopped by SIGTERM during start-up\n"
    built = [p.relative_to(cache) for p in cache.rglob("*")]
    assert not [p for p in built if "demo-model" in str(p)], built


@pytest.mark.engine
def test_user_signals_in_start_up_and_stop_signals_while_the_results_are_written(
    tmp_path: Path,
) -> None:
    """USR1 and USR2 while vLLM is imported, no flight recorder: answered once each, and the
    run goes on. Then the run is over and its outputs are being finished: a second SIGTERM
    from systemd (or a Ctrl+C from an impatient user) must not cut them. Told once each, and
    the run ends as it would."""
    workload = write_workload(tmp_path / "workload.jsonl", 3, longest=16)
    results = tmp_path / "results.jsonl"
    csv = tmp_path / "steps.csv"
    done = launch(
        [*USER_SIGNALS_IN_START_UP, "signals-in-finish", "TERM", "HUP", "TERM", "INT"],
        ["--prompts", str(workload), "--results", str(results), "--export-csv", str(csv)],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert_user_signals_answered_once(done.stderr, recorder=False)
    for name, more in (("SIGTERM", ""), ("SIGHUP", ""), ("SIGINT", AGAIN_TO_LEAVE)):
        said = f"stepview: {STOPPING_ALREADY.format(name=name)}{more}\n"
        assert done.stderr.count(said) == 1, done.stderr
    assert_whole_results(results)
    assert csv.read_text().count("\n") > 1  # the export written after the signals, whole
    assert "\npreemptions: " in done.stderr  # the summary of a run that went to its end


@pytest.mark.engine
def test_a_stop_signal_while_the_engine_is_built_ends_it_at_once(tmp_path: Path) -> None:
    """The engine's build (on the driver thread; a conversion, the weights' load) cannot be
    interrupted, and waiting 4 s for it ended "the engine did not stop in time", exit 1. It
    is start-up, as above: the same line and code, at once, the build's process ended."""
    workload = write_workload(tmp_path / "workload.jsonl", 3, longest=16)
    child = tmp_path / "child.pid"
    done = launch(
        ["stuck-in-start-up", "TERM"],
        ["--prompts", str(workload)],
        tmp_path,
        {"STEPVIEW_TEST_CHILD_PID": str(child)},
    )
    assert done.returncode == 143, done.stderr
    assert done.stderr == "stepview: stopped by SIGTERM during start-up\n"
    try:
        build = psutil.Process(int(child.read_text()))
    except psutil.NoSuchProcess:
        return
    assert gone(build), build  # a zombie is gone: it was ended, its parent left first


@pytest.mark.engine
def test_user_signals_in_start_up_with_a_recorder_and_ctrl_c_twice_while_results_are_written(
    tmp_path: Path,
) -> None:
    """USR1 and USR2 while vLLM is imported, a flight recorder asked for: answered once each,
    the run goes on, and nothing is written (asked before the first step: no empty
    recording). Then a way out of a slow disk: the second Ctrl+C while the outputs are
    finished leaves, as the first said it would; the results file, written as each request
    ended, is whole."""
    workload = write_workload(tmp_path / "workload.jsonl", 3, longest=16)
    results = tmp_path / "results.jsonl"
    flight = ["--flight-recorder", "10m", "--flight-dir", str(tmp_path / "flight")]
    done = launch(
        [*USER_SIGNALS_IN_START_UP, "signals-in-finish", "INT", "INT"],
        ["--prompts", str(workload), "--results", str(results), *flight],
        tmp_path,
    )
    assert done.returncode == 130, done.stderr
    assert_user_signals_answered_once(done.stderr, recorder=True)
    told = f"stepview: {STOPPING_ALREADY.format(name='SIGINT')}{AGAIN_TO_LEAVE}"
    assert done.stderr.splitlines()[-2:] == [told, "stepview: interrupted"], done.stderr
    assert_whole_results(results)
    assert not list((tmp_path / "flight").glob("*"))
