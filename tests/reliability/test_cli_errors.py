"""Command-line mistakes end in one short line naming the problem, never a traceback or usage.

The real command runs in a subprocess (or in tmux where the TUI has started before the
mistake can be seen). Mistakes stepview can see without vLLM (its own flags, prompts files,
traces, engine flags checked against the cached list of vLLM's options) cost no engine
start; the ones only vLLM's parser can judge are marked ``engine``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil
import pytest

from stepview.cli import main
from stepview.engine.own.engine_args import UsageError, check_option_names, local_model_problem
from tests.e2e.conftest import OpenTerminal
from tests.e2e.terminal import PROMPT, QUIT_WITHIN_S, STEPVIEW, command_env, wait_gone

USAGE = 2


def run(
    args: Sequence[str],
    tmp_path: Path,
    *,
    cache: Path | None = None,
    timeout: float = 120,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """The installed ``stepview`` with ``args``; ``cache`` replaces the user cache directory,
    ``env`` adds to the environment."""
    extra = {"XDG_CACHE_HOME": str(cache)} if cache is not None else {}
    extra.update(env or {})
    return subprocess.run(
        [STEPVIEW, "--log-file", str(tmp_path / "log.txt"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=command_env(extra),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )


def in_process(
    args: Sequence[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> subprocess.CompletedProcess[str]:
    """``stepview.cli.main(args)`` in this process, read like :func:`run`'s process.

    For paths whose exit code and stderr one real process per kind already proves: the
    answer is the same function's, without the process's start and ``import vllm``.
    """
    capsys.readouterr()
    code = main(["--log-file", str(tmp_path / "log.txt"), *args])
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


def assert_one_line_error(done: subprocess.CompletedProcess[str], *parts: str) -> str:
    """Exit code 2, nothing on stdout, one ``stepview: ...`` line on stderr holding ``parts``."""
    assert done.returncode == USAGE, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    (line,) = lines
    assert line.startswith("stepview: "), line
    for part in parts:
        assert part in line, line
    assert "Traceback" not in done.stderr and "usage:" not in done.stderr
    return line


# -- unknown flags ------------------------------------------------------------------------------


@pytest.mark.engine
def test_unknown_flag_headless_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run(["--headless", "--max-num-seqz", "4"], tmp_path)
    assert_one_line_error(
        done, "unknown option --max-num-seqz", "did you mean --max-num-seqs?", "stepview --help"
    )


def test_unknown_flag_tui_is_caught_from_the_cached_names_before_anything_starts(
    tmp_path: Path, option_cache: Path
) -> None:
    done = run(["--max_num_seqz=4"], tmp_path, cache=option_cache)
    assert_one_line_error(done, "unknown option --max_num_seqz", "see 'stepview --help'")


def test_cached_names_accept_what_vllms_parser_accepts(
    option_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Underscores, ``=value``, and unique prefixes (vLLM's parser allows abbreviations)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(option_cache))
    check_option_names(["--max_num_seqs=4", "--dtype", "float32", "--enforce", "--max-mod", "9"])
    with pytest.raises(UsageError, match="unknown option --max-num-seqz"):
        check_option_names(["--max-num-seqz", "4"])


@pytest.mark.e2e
@pytest.mark.engine
def test_unknown_flag_tui_without_cache_app_leaves_by_itself_with_the_short_message(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    """No cached names (first run, new vLLM): only vLLM's parser, after the app started,
    can tell. The app leaves by itself and the same one line ends up on the terminal."""
    empty_cache = tmp_path / "empty-cache"
    empty_cache.mkdir()
    term = open_terminal(80, 24, env={"XDG_CACHE_HOME": str(empty_cache)})
    term.run([STEPVIEW, "--log-file", str(tmp_path / "log.txt"), "--no-such-flag", "1"])
    stepview = term.command_process()
    assert term.wait_for_exit(timeout=120) == USAGE
    wait_gone(stepview, timeout=QUIT_WITHIN_S)
    screen = term.screen()
    # The typed command may wrap at 80 columns (long temp paths), so read the screen from the end.
    lines = [line for line in screen.splitlines() if line.strip()]
    message, exit_line, prompt = lines[-3:]
    assert "usage:" not in screen.lower()
    assert message == "stepview: unknown option --no-such-flag; see 'stepview --help'"
    assert exit_line == "EXIT=2" and prompt == PROMPT.rstrip()
    assert term.flag("alternate_on") == "0"


# -- bad values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "parts"),
    [
        (["--history", "many"], ["argument --history: invalid int value: 'many'"]),
        (["--history", "0"], ["argument --history: must be 1 or more, got 0"]),
        (["--headless", "--history", "-5"], ["argument --history: must be 1 or more, got -5"]),
        (["--admit-per-step", "-1"], ["argument --admit-per-step: must be 0 or more, got -1"]),
        (["--headless", "--admit-per-step", "x"], ["argument --admit-per-step"]),
        (["--replay-speed", "0", "--replay", "t"], ["argument --replay-speed"]),
    ],
)
def test_bad_value_of_a_stepview_flag_is_one_line(
    args: list[str], parts: list[str], tmp_path: Path
) -> None:
    assert_one_line_error(run(args, tmp_path), *parts)


def test_a_fleet_listing_that_cannot_be_used_is_one_line(tmp_path: Path) -> None:
    """A file_sd file Prometheus would refuse, and a prometheus:// address with a typo."""
    listed = tmp_path / "targets.yml"
    listed.write_text("- targets: [gpu-a:8000]\n  labels: {1zone: a}\n")
    done = run(["--attach-file", str(listed), "--headless"], tmp_path)
    assert_one_line_error(done, f"--attach-file: {listed}: target group 1: '1zone' is not a")
    done = run(["--attach", "prometheus://prom:9090?jobs=vllm"], tmp_path)
    assert_one_line_error(done, "--attach: prometheus://prom:9090?jobs=vllm: unknown 'jobs'")


@pytest.mark.engine
def test_bad_value_of_an_engine_flag_headless_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM's parser judges it; the unknown-flag test above is this path's real process."""
    done = in_process(["--headless", "--max-num-seqs", "many"], tmp_path, capsys)
    assert_one_line_error(done, "argument --max-num-seqs: invalid int value: 'many'")


# -- models that are not there ------------------------------------------------------------------


@pytest.mark.engine
def test_missing_model_directory_headless(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Seen by stepview before vLLM; the unknown-flag test has this path's real process."""
    done = in_process(["--headless", "--model", str(tmp_path / "no-such-model")], tmp_path, capsys)
    assert_one_line_error(done, f"model directory {tmp_path / 'no-such-model'} does not exist")


@pytest.mark.engine
def test_unknown_hugging_face_model_offline_headless(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM resolves a model name while it builds its arguments; a refusal is one line. The
    same path as an unknown flag (a ``UsageError`` from ``parse_engine_args``), whose test
    above has its real process."""
    done = in_process(["--headless", "--model", "no-such-org/no-such-model"], tmp_path, capsys)
    assert_one_line_error(done, "vLLM cannot use --model no-such-org/no-such-model")


def unusable_models(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Local models vLLM cannot load, each with what the one line must say."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a model\n")
    empty = tmp_path / "empty-model"
    empty.mkdir()
    no_config = tmp_path / "weights-only"
    no_config.mkdir()
    (no_config / "model.safetensors").write_bytes(b"\0" * 16)
    corrupt = tmp_path / "corrupt-model"
    corrupt.mkdir()
    (corrupt / "config.json").write_text('{"model_type": "qwen3", ')
    return {
        "file": (a_file, f"--model {a_file} is a file, not a model directory"),
        "empty": (empty, f"model directory {empty} is empty: not a model"),
        "no-config": (no_config, f"model directory {no_config} has no config.json"),
        "corrupt": (corrupt, f"{corrupt / 'config.json'} is not valid JSON (Expecting"),
    }


def test_unusable_local_models_are_named_without_vllm(tmp_path: Path) -> None:
    for path, message in unusable_models(tmp_path).values():
        problem = local_model_problem(str(path))
        assert problem is not None and problem.startswith(message), problem
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    mistral = tmp_path / "mistral"
    mistral.mkdir()
    (mistral / "params.json").write_text("{}")
    for fine in (str(gguf), str(mistral), "Qwen/Qwen3-0.6B"):  # left to vLLM
        assert local_model_problem(fine) is None


@pytest.mark.engine
def test_unusable_model_headless_is_one_line_once_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file, an empty directory, a corrupt config.json: vLLM would say so seconds later in
    a 9-line validation error, repeated for every request; stepview says it once, exit 2.
    In this process: the refusal is a ``UsageError`` from ``parse_engine_args``, the path
    whose exit code and stderr the unknown-flag test above proves in a real process."""
    for path, message in unusable_models(tmp_path).values():
        done = in_process(["--headless", "--model", str(path)], tmp_path, capsys)
        assert_one_line_error(done, message)


@pytest.mark.engine
def test_a_model_only_vllm_can_refuse_is_reported_once(tmp_path: Path) -> None:
    """A config.json vLLM cannot use (no model_type): found while the engine starts. The
    message comes once, no request is rejected with it, and stdout stays empty."""
    model = tmp_path / "odd-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    done = run(["--headless", "--model", str(model)], tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("stepview: engine start-up failed: ")
    assert done.stderr.count("stepview:") == 1 and "model_type" in done.stderr
    assert "rejected" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.e2e
@pytest.mark.engine
def test_missing_model_directory_tui_leaves_with_the_message(
    open_terminal: OpenTerminal, tmp_path: Path
) -> None:
    term = open_terminal(80, 24)
    missing = tmp_path / "typo"
    term.run([STEPVIEW, "--log-file", str(tmp_path / "log.txt"), "--model", str(missing)])
    assert term.wait_for_exit(timeout=120) == USAGE
    screen = term.text()
    assert f"stepview: model directory {missing} does not exist" in screen
    assert "Traceback" not in screen and "finished requests saved" not in screen


# -- prompts files ------------------------------------------------------------------------------


def prompts_problems(tmp_path: Path) -> list[tuple[Path, str]]:
    """Prompts files that cannot be used, each with what the one line must say."""
    directory = tmp_path / "a-directory"
    directory.mkdir()
    fifo = tmp_path / "a-fifo"
    os.mkfifo(fifo)  # nobody writes to it: reading it must not hang
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(b'{"prompt": "fine"}\n{"prompt": "caf\xe9"}\n')
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"prompt": "a"}\n\n{"prompt": "b", "params": {"max_tokens": 3}\n')
    typo = tmp_path / "typo.jsonl"
    typo.write_text('{"prompt": "a", "params": {"temp": 0.5}}\n')
    seed = tmp_path / "seed.jsonl"
    seed.write_text('{"prompt": "a", "params": {"seed": 18446744073709551616}}\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_text("# nothing but a comment\n\n")
    return [
        (directory, f"cannot read prompts file {directory}: Is a directory"),
        (fifo, f"{fifo}: no prompts in the file"),
        (latin1, f"{latin1}:2: not UTF-8 text"),
        (broken, f"{broken}:3: not valid JSON"),
        (typo, f"{typo}:1: unknown sampling parameter(s): temp"),
        (seed, f"{seed}:1: seed must be between -2**63 and 2**64-1"),
        (empty, f"{empty}: no prompts in the file"),
        (tmp_path / "missing.jsonl", "cannot read prompts file"),
    ]


@pytest.mark.parametrize("mode", [["--headless"], []], ids=["headless", "tui"])
def test_unusable_prompts_file_is_one_line_naming_file_and_line(
    mode: list[str],
    tmp_path: Path,
    option_cache: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first file in a real process (exit code and stderr, in each mode), the others
    through the same call in this process (no ``import vllm`` either way)."""
    (first, first_message), *others = prompts_problems(tmp_path)
    done = run([*mode, "--prompts", str(first)], tmp_path, cache=option_cache)
    assert_one_line_error(done, first_message)
    monkeypatch.setenv("XDG_CACHE_HOME", str(option_cache))
    for path, message in others:
        assert_one_line_error(
            in_process([*mode, "--prompts", str(path)], tmp_path, capsys), message
        )


# -- traces -------------------------------------------------------------------------------------


def test_replay_of_something_that_is_not_a_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first in a real process (exit code and stderr), the others through the same call."""
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"id": "0", "prompt": "p", "state": "finished"}) + "\n")
    text = tmp_path / "notes.txt"
    text.write_text("just some notes\n")
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    newer = tmp_path / "newer.trace.jsonl"
    newer.write_text(json.dumps({"kind": "stepview-trace", "version": 99}) + "\n")
    directory = tmp_path / "traces"
    directory.mkdir()
    cases = [
        (results, "is not a stepview trace (line 1 has no kind"),
        (text, "is not a stepview trace (line 1 is not JSON)"),
        (binary, "is not a stepview trace"),
        (empty, "is not a stepview trace (it is empty)"),
        (newer, "is trace version 99, written by a newer stepview"),
        (directory, f"cannot open trace {directory}"),
        (tmp_path / "missing.trace.jsonl", "cannot open trace"),
    ]
    (first, first_message), *others = cases
    assert_one_line_error(run(["--replay", str(first)], tmp_path), first_message)
    for path, message in others:
        assert_one_line_error(in_process(["--replay", str(path)], tmp_path, capsys), message)
    done = in_process(["--replay", str(results), "--max-num-seqs", "4"], tmp_path, capsys)
    assert_one_line_error(done, "--replay takes no engine flags (got --max-num-seqs 4)")


def test_no_vllm_is_imported_for_mistakes_stepview_can_see_itself(
    tmp_path: Path, option_cache: Path
) -> None:
    """These answers come at once: the 3-6 s ``import vllm`` is not paid for them."""
    argv = ["--log-file", str(tmp_path / "log.txt"), "--prompts", str(tmp_path / "missing")]
    code = f"import sys, stepview.cli\nstepview.cli.main({argv!r})\nprint('vllm' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        env=command_env({"XDG_CACHE_HOME": str(option_cache)}),
        cwd=tmp_path,
    )
    assert "cannot read prompts file" in done.stderr
    assert done.stdout.strip() == "False", done.stderr


def loading_torch(pid: int) -> bool:
    """True once the process has mapped torch's library: ``import vllm`` has begun."""
    try:
        return any("libtorch" in m.path for m in psutil.Process(pid).memory_maps())
    except psutil.Error:
        return False


@pytest.mark.engine
def test_ctrl_c_while_vllm_is_still_loading_is_one_line(tmp_path: Path) -> None:
    """SIGINT before stepview's own handlers are in place: no traceback through vLLM."""
    log = tmp_path / "log.txt"
    process = subprocess.Popen(
        [STEPVIEW, "--headless", "--log-file", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=command_env(),
        cwd=tmp_path,
        # A suite started in the background inherits SIGINT ignored, and stepview keeps an
        # ignored SIGINT ignored (as a shell's background job asks): give it a user's terminal.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while not loading_torch(process.pid):  # vLLM's import is under way
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert "Traceback" not in err
    assert err.startswith("stepview: interrupted") and len(err.splitlines()) == 1, err
    assert process.returncode in (130, 1)  # 1: it got as far as running the prompts
