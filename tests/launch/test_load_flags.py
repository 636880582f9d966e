"""The load flags and the exports on the real command line: refused before anything runs,
and a replay exported to CSV and to a Chrome trace without vLLM.

Every refusal is checked in-process through :func:`stepview.cli.main` (a child process per case
spent a second importing stepview and checked nothing more); one refusal of each kind, the
parser's own and a conflict between flags, also runs as the real ``stepview`` command: its
exit code and stderr are what a user sees.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from stepview.cli import main
from stepview.files.csv_export import COLUMNS
from stepview.launch.summary import summarize
from stepview.trace.reader import load_trace
from tests.e2e.terminal import command_env
from tests.helpers import DATA
from tests.insight.chrome_checks import check_against_run, load

REPLAY = DATA / "replay.trace.jsonl"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--load", "5", "--rate", "-1"], "argument --rate: must be above 0"),
        (["--load", "5", "--rate", "0"], "argument --rate: must be above 0"),
        (["--load", "5", "--input-len", "9:3"], "argument --input-len: MIN must not be above MAX"),
        (["--load", "5", "--input-len", "x"], "argument --input-len: must be MIN:MAX"),
        (["--load", "0"], "argument --load: must be 1 or more"),
        (["--load", "x"], "argument --load: must be a whole number"),
        (["--load", "5", "--output-len", "0:0"], "argument --output-len: lengths must be 1"),
        (["--load", "5", "--load-mix", "beam:1"], "argument --load-mix: unknown kind"),
        (["--load", "5", "--load-seed", "s"], "argument --load-seed: must be a whole number"),
        (["--rate", "2"], "--rate go with --load N"),
        (["--load", "5", "--input-len", "600"], "shorter than --max-model-len 512"),
        (
            ["--load", "5", "--input-len", "400", "--output-len", "200"],
            "more than --max-model-len 512",
        ),
        (
            ["--load", "5", "--input-len", "100:200", "--max-model-len", "128"],
            "shorter than --max-model-len 128",
        ),
        (["--load", "5", "--replay", str(REPLAY)], "--load sends requests to an engine"),
        (["--load", "5", "--attach", "tcp://127.0.0.1:1"], "--attach"),
        (["--load", "5", "--export-csv", "/no/such/dir/out.csv"], "--export-csv"),
        (["--export-chrome-trace", "/no/such/dir/out.json"], "--export-chrome-trace"),
        (["--export-csv", "same", "--export-chrome-trace", "same"], "name the same file"),
    ],
)
@pytest.mark.parametrize("mode", [["--headless"], []])
def test_bad_load_flags_refused_in_one_line_with_exit_2(
    args: list[str],
    message: str,
    mode: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    try:
        code = main(["--log-file", str(tmp_path / "log.txt"), *mode, *args])
    except SystemExit as exc:  # the parser's own refusals
        code = exc.code
    out, err = capsys.readouterr()
    assert_refused(code, out, err, message)


@pytest.mark.parametrize(
    ("mode", "args", "message"),
    [
        (["--headless"], ["--load", "x"], "argument --load: must be a whole number"),
        ([], ["--rate", "2"], "--rate go with --load N"),
    ],
    ids=["parser", "conflict"],
)
def test_the_real_command_refuses_bad_load_flags_in_one_line_with_exit_2(  # type: ignore[no-untyped-def]
    run_stepview, mode: list[str], args: list[str], message: str
) -> None:
    done = run_stepview([*mode, *args], timeout=60)
    assert_refused(done.returncode, done.stdout, done.stderr, message)


def assert_refused(code: object, out: str, err: str, message: str) -> None:
    """Exit status 2, nothing on stdout, and one line on stderr that says ``message``."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("stepview: ")
    assert message in lines[0]
    assert out == ""


def test_help_documents_the_load_flags(run_stepview) -> None:  # type: ignore[no-untyped-def]
    done = run_stepview(["--help"], timeout=120)
    flags = ("--load N", "--rate R", "--input-len MIN:MAX", "--load-mix MIX", "--export-csv")
    for flag in (*flags, "--export-chrome-trace OUT.json"):
        assert flag in done.stdout
    assert "greedy" in done.stdout and "sampled" in done.stdout


def test_replay_exported_to_csv_without_vllm_or_ui(tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    code = (
        "import sys\nfrom stepview.cli import main\n"
        f"rc = main(['--replay', {str(REPLAY)!r}, '--export-csv', {str(out)!r}])\n"
        "assert 'vllm' not in sys.modules and 'textual.app' not in sys.modules\n"
        "sys.exit(rc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=command_env(), timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "exported to" in done.stderr
    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == COLUMNS
    assert rows
    ids = [row["id"] for row in rows]
    assert len(ids) == len(set(ids))
    arrivals = [float(row["arrival"]) for row in rows]
    assert arrivals == sorted(arrivals)
    for row in rows:
        if row["state"] == "finished":
            assert float(row["e2e"]) == pytest.approx(
                float(row["finished"]) - float(row["arrival"]), abs=1e-5
            )
            assert float(row["ttft"]) <= float(row["e2e"]) + 1e-9
            assert int(row["output_tokens"]) >= 1
            assert row["finish_reason"]


def test_replay_exported_to_a_chrome_trace_without_vllm_or_ui(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    code = (
        "import sys\nfrom stepview.cli import main\n"
        f"rc = main(['--replay', {str(REPLAY)!r}, '--export-chrome-trace', {str(out)!r}])\n"
        "assert 'vllm' not in sys.modules and 'textual.app' not in sys.modules\n"
        "sys.exit(rc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=command_env(), timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "request track(s) exported to" in done.stderr
    trace = load_trace(REPLAY)
    snapshots = [trace.snapshots[i] for i in range(len(trace.snapshots))]
    check_against_run(load(out), summarize(trace, keep_steps=True), snapshots)


def test_replay_export_to_an_unwritable_place_fails_before_reading(tmp_path: Path) -> None:
    out = tmp_path / "missing" / "out.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stepview",
            "--replay",
            str(REPLAY),
            "--export-chrome-trace",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=command_env(),
        timeout=60,
    )
    assert done.returncode == 2
    assert "--export-chrome-trace" in done.stderr and "does not exist" in done.stderr
