"""``--rerun``, ``--rerun-speed`` and ``--export-workload`` on the command line: a mistake is
one ``stepview: ...`` line and exit 2 before any engine starts; an export is written from a
trace without vLLM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stepview.cli import main
from stepview.cli.args import parse_own_args
from stepview.model.grow import Frozen
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import (
    Completion,
    EngineInfo,
    EngineState,
    RequestState,
    RequestView,
    StepSnapshot,
    Timings,
)
from tests.e2e.terminal import command_env
from tests.reliability.test_cli_errors import assert_one_line_error
from tests.trace.runs import write_trace

INFO = EngineInfo(model="m", block_size=4)


def _view(rid: str, prompt: str, ids: tuple[int, ...]) -> RequestView:
    spec = SamplingSpec(temperature=0.0, max_tokens=3)
    sample = Completion.of_text(0, "abc", token_ids=Frozen([1, 2, 3]), finish_reason="length")
    return RequestView(
        rid,
        prompt,
        spec,
        RequestState.FINISHED,
        Timings(1.0, 1.1, 1.2, 2.0),
        prompt_tokens=len(ids),
        prompt_token_ids=ids,
        completions=(sample,),
    )


def _trace(path: Path, *views: RequestView) -> Path:
    write_trace(
        path,
        [
            StepSnapshot(step=0, clock=0.5, engine_state=EngineState.IDLE, info=INFO),
            StepSnapshot(
                step=3, clock=2.0, engine_state=EngineState.IDLE, info=INFO, finished=Frozen(views)
            ),
        ],
    )
    return path


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return _trace(
        tmp_path / "run.trace.jsonl",
        _view("t", "Once upon a time", (7, 8, 9, 10, 11)),
        _view("lost", "(synthetic greedy: 2 random token ids)", ()),
    )


def _fails(args: list[str], capsys: pytest.CaptureFixture[str], says: str) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("stepview: ") and says in err and len(err.splitlines()) == 1, err


def test_the_flags_are_read_with_stepviews_own(tmp_path: Path) -> None:
    own, rest = parse_own_args(
        ["--rerun", "t.jsonl", "--rerun-speed", "4", "--max-num-seqs", "8", "--summary"]
    )
    assert (own.rerun, own.rerun_speed, own.summary, rest) == (
        Path("t.jsonl"),
        4.0,
        True,
        ["--max-num-seqs", "8"],
    )
    own, _ = parse_own_args(
        ["--replay", "t", "--export-workload", "a", "--export-workload", "vllm:b"]
    )
    assert own.outputs["export_workload"] == ["a", "vllm:b"]


@pytest.mark.parametrize("speed", ["0", "-1", "nan", "soon"])
def test_a_speed_not_above_zero_is_refused(speed: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_own_args(["--rerun", "t", "--rerun-speed", speed])
    assert exit_info.value.code == 2
    assert "--rerun-speed: must be a number above 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--replay", "{t}"], "--rerun and --replay exclude each other"),
        (["--attach", "tcp://127.0.0.1:5570"], "--rerun runs on an engine of stepview's own"),
        (["--prompts", "p.jsonl"], "no --prompts or --load beside them"),
        (["--load", "4"], "no --prompts or --load beside them"),
        (["--headless", "--json", "--summary"], "--json prints each request and --summary"),
        (["--compare", "{t}"], "--compare FILE goes with --replay FILE"),
    ],
)
def test_a_rerun_refuses_what_cannot_go_with_it(
    trace: Path, args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    given = [arg.replace("{t}", str(trace)) for arg in args]
    _fails(["--rerun", str(trace), *given], capsys, says)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--rerun-speed", "2"], "--rerun-speed goes with --rerun TRACE"),
        (["--export-workload", "w.jsonl"], "--export-workload goes with --replay TRACE"),
        (["--summary"], "--summary goes with --replay FILE or --rerun TRACE"),
    ],
)
def test_flags_of_a_rerun_or_export_alone_are_refused(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _fails(args, capsys, says)


def test_export_and_compare_exclude_each_other(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = _trace(tmp_path / "other.jsonl", _view("t", "x", (1,)))
    args = ["--replay", str(trace), "--compare", str(other), "--export-workload", "w.jsonl"]
    _fails(args, capsys, "--compare and the exports exclude each other")


def test_a_trace_that_cannot_be_rerun_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = ["--log-file", str(tmp_path / "log.txt")]
    _fails(["--rerun", str(tmp_path / "missing.jsonl"), *log], capsys, "cannot open trace")
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    _fails(["--rerun", str(notes), *log], capsys, "is not a stepview trace")
    nothing = _trace(tmp_path / "lost.jsonl", _view("lost", "(3 token ids)", ()))
    _fails(["--rerun", str(nothing), *log], capsys, "no request to rerun (1 whose prompt cannot")


def test_the_rerun_is_not_recorded_over_its_trace(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = trace.read_bytes()
    args = ["--rerun", str(trace), "--record", str(trace), "--log-file", str(tmp_path / "log")]
    _fails(args, capsys, "is the trace given to --rerun")
    assert trace.read_bytes() == before


def test_the_workload_is_exported_from_a_trace_in_both_formats(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine, theirs = tmp_path / "w.jsonl", tmp_path / "timed.jsonl"
    args = ["--replay", str(trace), "--export-workload", str(mine)]
    assert main([*args, "--export-workload", f"vllm:{theirs}"]) == 0
    err = capsys.readouterr().err
    assert "lost left out of" in err and "--timed-trace-chunk-hash-size 4 --num-prompts 1" in err
    lines = [json.loads(line) for line in mine.read_text().splitlines() if line[0] != "#"]
    assert [(line["id"], line["prompt"], line["params"]["ignore_eos"]) for line in lines] == [
        ("t", "Once upon a time", True)  # it ran out of max_tokens: held to its length
    ]
    [timed] = [json.loads(line) for line in theirs.read_text().splitlines()]
    assert (timed["input_length"], timed["output_length"], timed["hash_ids"]) == (5, 3, [0, 1])


def test_an_export_that_cannot_be_written_is_refused_first(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = f"vllm:{tmp_path / 'no' / 'such' / 'dir.jsonl'}"
    _fails(["--replay", str(trace), "--export-workload", target], capsys, "cannot write")


def test_no_terminal_for_the_compare_view_is_refused_before_the_rerun(
    trace: Path, tmp_path: Path
) -> None:
    """The compare view opens once the rerun is over: a terminal it cannot have is said first,
    not after minutes of rerun (and no engine is started)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stepview",
            "--log-file",
            str(tmp_path / "log"),
            "--rerun",
            str(trace),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=command_env(),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # no controlling terminal
    )
    line = assert_one_line_error(done, "stdin is not a terminal")
    assert line.endswith("; use --summary or --headless to rerun without the compare view")
