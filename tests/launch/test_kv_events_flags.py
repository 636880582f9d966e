"""``--kv-events``: it goes with ``--attach http://…`` only, and takes a zmq address; a mistake
is one line and exit code 2, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepview.cli import main
from stepview.cli.args import parse_own_args


def test_the_flag_is_read_with_stepviews_own() -> None:
    own, rest = parse_own_args(["--attach", "http://h:8000", "--kv-events", "tcp://h:5557"])
    assert own.kv_events == "tcp://h:5557" and rest == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kv-events", "tcp://h:5557"], "--kv-events goes with --attach http://HOST:PORT"),
        (["--attach", "tcp://h:1", "--kv-events", "tcp://h:5557"], "--kv-events goes with"),
        (
            ["--attach", "http://127.0.0.1:1", "--headless", "--kv-events", "h:5557"],
            "--kv-events: a KV event address is tcp://HOST:PORT or ipc://PATH, not 'h:5557'",
        ),
    ],
)
def test_mistakes_stop_before_anything_starts(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--log-file", str(tmp_path / "log"), *args])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("stepview: ") and err.count("\n") == 1
    assert message in err
