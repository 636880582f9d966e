"""Output files named on the command line (``--results``, ``--record``, ``--log-file``): one rule.

The directory must exist, as for the shell's ``>``: stepview creates only its own default
directories, so a mistyped path is refused in one line, before the engine starts (no 6 s
wait, no line of dashes first) and without leaving a file or a directory behind. These runs
end before ``import vllm``; they cost no engine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stepview.outputs.paths import check_output_paths, output_path_problem
from tests.reliability.test_cli_errors import assert_one_line_error, run

MODES = pytest.mark.parametrize("mode", [["--headless"], []], ids=["headless", "tui"])


@MODES
@pytest.mark.parametrize("flag", ["--results", "--record", "--log-file"])
def test_a_missing_directory_is_refused_for_every_output_flag_and_not_created(
    mode: list[str], flag: str, tmp_path: Path, option_cache: Path
) -> None:
    target = tmp_path / "no" / "such" / "dir" / "out.jsonl"
    done = run([*mode, flag, str(target)], tmp_path, cache=option_cache, timeout=30)
    assert_one_line_error(
        done, f"cannot write {flag} {target}: directory {target.parent} does not exist"
    )
    assert not (tmp_path / "no").exists()


@MODES
def test_a_directory_or_a_file_in_the_way_is_refused(
    mode: list[str], tmp_path: Path, option_cache: Path
) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    plain = tmp_path / "plain.txt"
    plain.write_text("keep me\n")
    cases = [
        (["--results", str(folder)], f"cannot write --results {folder}: {folder} is a directory"),
        (
            ["--record", str(plain / "t.jsonl")],
            f"cannot write --record {plain / 't.jsonl'}: directory {plain} is not a directory",
        ),
        (
            ["--results", str(tmp_path / "same"), "--record", str(tmp_path / "same")],
            f"--results and --record name the same file, {tmp_path / 'same'}",
        ),
    ]
    for args, message in cases:
        done = run([*mode, *args], tmp_path, cache=option_cache, timeout=30)
        assert_one_line_error(done, message)
    assert plain.read_text() == "keep me\n"
    assert not (tmp_path / "same").exists()


def test_a_failed_tui_start_leaves_no_empty_results_file(
    tmp_path: Path, option_cache: Path
) -> None:
    """The default results file (in stepview's data directory) is not created for a start
    that fails on a bad ``--record`` path: no empty ``results-*.jsonl`` piles up."""
    data = tmp_path / "data"
    missing = tmp_path / "missing" / "t.jsonl"
    extra = {"XDG_DATA_HOME": str(data)}
    for _ in range(2):
        done = run(["--record", str(missing)], tmp_path, cache=option_cache, timeout=30, env=extra)
        assert_one_line_error(done, f"cannot write --record {missing}")
    assert not data.exists() or list(data.rglob("*.jsonl")) == []


def test_the_check_opens_for_real_and_leaves_files_as_they_were(tmp_path: Path) -> None:
    existing = tmp_path / "results.jsonl"
    existing.write_text('{"id": "0"}\n')
    new = tmp_path / "new.jsonl"
    assert output_path_problem(existing) is None and output_path_problem(new) is None
    assert existing.read_text() == '{"id": "0"}\n'  # not truncated
    assert not new.exists()  # the probe's file is gone again
    os.chmod(existing, 0o444)
    if os.geteuid() != 0:  # root may write anything
        assert output_path_problem(existing) == "Permission denied"
    assert check_output_paths({"--results": None, "--record": new}) is None
    (tmp_path / "sub").mkdir()
    same = tmp_path / "sub" / ".." / "new.jsonl"
    assert check_output_paths({"--results": new, "--record": same}) == (
        f"--results and --record name the same file, {same}"
    )
