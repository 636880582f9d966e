"""``--compare``: bad input stops at once (exit 2, one line); the summary needs no vLLM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stepview.cli import main
from tests.trace.runs import paced_snapshots, write_trace


@pytest.fixture
def two_traces(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a.trace.jsonl", tmp_path / "b.trace.jsonl"
    write_trace(a, paced_snapshots(3))
    write_trace(b, paced_snapshots(4))
    return a, b


def _fails(args: list[str], capsys: pytest.CaptureFixture[str], says: str) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err


def test_compare_without_replay(
    two_traces: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _fails(["--compare", str(two_traces[1])], capsys, "--compare FILE goes with --replay FILE")


@pytest.mark.parametrize("extra", [["--headless"], ["--attach", "localhost:1"]])
def test_compare_with_headless_or_attach(
    two_traces: tuple[Path, Path], extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = two_traces
    _fails(
        ["--replay", str(a), "--compare", str(b), *extra], capsys, "not with --attach or --headless"
    )


def test_a_trace_with_itself(
    two_traces: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = two_traces
    _fails(
        ["--replay", str(a), "--compare", str(a), "--summary"], capsys, "compare two different runs"
    )
    link = a.parent / "link.jsonl"
    link.symlink_to(a)
    _fails(["--replay", str(a), "--compare", str(link)], capsys, "compare two different runs")


def test_b_not_a_trace(
    two_traces: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = two_traces
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    _fails(
        ["--replay", str(a), "--compare", str(other), "--summary"],
        capsys,
        "is not a stepview trace",
    )
    _fails(
        ["--replay", str(a), "--compare", str(tmp_path / "missing")], capsys, "cannot open trace"
    )


def test_the_summary_prints_without_vllm_or_textual(two_traces: tuple[Path, Path]) -> None:
    a, b = two_traces
    code = (
        "import sys; from stepview.cli import main; "
        f"rc = main(['--replay', {str(a)!r}, '--compare', {str(b)!r}, '--summary']); "
        "assert 'vllm' not in sys.modules and 'textual' not in sys.modules; sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "no scheduling difference over 4 steps" in done.stdout
    assert done.stdout.startswith(f"A: {a}\nB: {b}\n")


@pytest.mark.parametrize("export", ["--export-csv", "--export-chrome-trace"])
def test_compare_with_an_export(
    two_traces: tuple[Path, Path],
    export: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = two_traces
    argv = ["--replay", str(a), "--compare", str(b), export, str(tmp_path / "out")]
    _fails(argv, capsys, "--compare and the exports exclude each other")


@pytest.mark.parametrize(
    "playback", [["--paused"], ["--replay-speed", "4"], ["--paused", "--replay-speed", "0.5"]]
)
@pytest.mark.parametrize("summary", [[], ["--summary"]])
def test_compare_refuses_playback_flags_before_reading_anything(
    tmp_path: Path,
    playback: list[str],
    summary: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The compare view has no playback: the flags would be ignored. Refused before either
    # file is read (neither exists here) and before any UI starts.
    a, b = tmp_path / "missing-a.jsonl", tmp_path / "missing-b.jsonl"
    argv = ["--replay", str(a), "--compare", str(b), *summary, *playback]
    _fails(argv, capsys, "--compare does not play the runs")


@pytest.mark.parametrize(
    "no_tui", [["--summary"], ["--export-csv", "out.csv"], ["--export-chrome-trace", "t.json"]]
)
def test_a_replay_without_the_tui_refuses_playback_flags(
    tmp_path: Path, no_tui: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--replay", str(tmp_path / "missing.jsonl"), *no_tui, "--paused"]
    _fails(argv, capsys, "--paused and --replay-speed go with a replay in the TUI")
