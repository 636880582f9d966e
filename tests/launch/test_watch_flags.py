"""The flags of a watch left running (:mod:`stepview.cli.watch`): their values and conflicts."""

from __future__ import annotations

import argparse

import pytest

from stepview.cli import main
from stepview.cli.args import parse_own_args
from stepview.run.flag_values import duration, size


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("90s", 90.0),
        ("10m", 600.0),
        ("10min", 600.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("0.5s", 0.5),
        ("5 M", 300.0),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0s", "-5m", "ten", "5y", "inf", "nan"])
def test_durations_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("65536", 65536),
        ("64K", 65536),
        ("100M", 100 << 20),
        ("100MB", 100 << 20),
        ("2g", 2 << 30),
        ("1.5G", 3 << 29),
    ],
)
def test_sizes(text: str, count: int) -> None:
    assert size(text) == count


@pytest.mark.parametrize("text", ["", "1K", "100", "-1M", "5T", "big"])
def test_sizes_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        size(text)


def test_a_bad_value_is_one_line_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse_own_args(["--flight-recorder", "soon"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("stepview: argument --flight-recorder: must be a duration")
        and err.count("\n") == 1
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--record-rotate", "100M"], "--record-rotate goes with --record FILE"),
        (
            ["--record", "t.jsonl", "--record-keep", "3"],
            "--record-keep goes with --record-rotate SIZE",
        ),
        (["--flight-dir", "/tmp"], "--flight-dir and --flight-max-mb go with --flight-recorder"),
        (["--flight-max-mb", "64"], "--flight-dir and --flight-max-mb go with --flight-recorder"),
        (["--replay", "t.jsonl", "--flight-recorder", "10m"], "--flight-recorder watch a running"),
        (["--replay", "t.jsonl", "--stuck-after", "60"], "--stuck-after watch a running engine"),
    ],
)
def test_flags_that_do_not_go_together(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "value"), [("--record-keep", "0"), ("--flight-max-mb", "0")])
def test_counts_must_be_one_or_more(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse_own_args(["--record", "t", "--record-rotate", "1M", flag, value])
    assert f"argument {flag}: must be 1 or more, got 0" in capsys.readouterr().err


def test_the_values_reach_the_options() -> None:
    own, rest = parse_own_args(
        [
            "--record",
            "t.jsonl",
            "--record-rotate",
            "500M",
            "--record-keep",
            "4",
            "--flight-recorder",
            "10m",
            "--flight-dir",
            "/var/tmp/f",
            "--stuck-after",
            "5m",
        ]
    )
    assert rest == []
    assert (own.outputs["record_rotate"], own.outputs["record_keep"]) == (500 << 20, 4)
    values = own.outputs
    assert (values["flight_recorder"], values["flight_dir"], values["flight_max_mb"]) == (
        600.0,
        "/var/tmp/f",
        256,
    )
    assert own.stuck_after == 300.0
