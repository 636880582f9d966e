"""Several servers: ``--attach`` repeated, a comma list, ``--attach-file``; one is no fleet."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepview.cli import main
from stepview.cli.args import parse_own_args


def test_one_address_is_the_single_view_as_ever() -> None:
    own = parse_own_args(["--attach", "tcp://h:1"])[0]
    assert (own.attach, own.fleet, own.is_fleet) == ("tcp://h:1", ("tcp://h:1",), False)
    assert parse_own_args([])[0].attach is None


def test_repeated_comma_list_and_file_make_one_fleet_without_repeats(tmp_path: Path) -> None:
    listed = tmp_path / "servers"
    listed.write_text("# our replicas\nhttp://b:8000\n\n  tcp://c:5570  \nhttp://a:8000\n")
    own = parse_own_args(
        [
            "--attach",
            "http://a:8000",
            "--attach",
            "ipc:///s,http://b:8000",
            "--attach-file",
            str(listed),
        ]
    )[0]
    assert own.fleet == ("http://a:8000", "ipc:///s", "http://b:8000", "tcp://c:5570")
    assert own.is_fleet and own.attach == "http://a:8000"
    # A file alone naming one server is the single view.
    single = tmp_path / "one"
    single.write_text("tcp://c:5570\n")
    assert not parse_own_args(["--attach-file", str(single)])[0].is_fleet


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--attach", "tcp://h:1,http://h:8000", "--api", "http://h:8000"],
            "--api: not with several servers (2 given)",
        ),
        (
            ["--attach", "tcp://h:1", "--attach", "tcp://h:2", "--record", "t.jsonl"],
            "--record: not with several",
        ),
        (["--attach", "tcp://h:1,h:2"], "--attach: 'h:2' is not a tcp://HOST:PORT"),
        (["--attach", "tcp://h:1,http://h:8000", "--model", "m"], "takes no engine flags"),
        (["--attach", "tcp://h:1,"], "an empty address"),
        (["--attach-file", "/nonexistent/servers"], "--attach-file: cannot read"),
    ],
)
def test_fleet_mistakes_stop_before_anything_starts(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["--log-file", str(tmp_path / "log"), *args])
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
