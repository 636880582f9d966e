"""``--attach``, ``--attach-ranks`` and ``--api``: every mistake is one line and exit code 2,
before anything starts (no socket, no app, no vLLM)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stepview.cli import main
from stepview.cli.args import parse_own_args
from stepview.model.address import zmq_endpoint


def test_the_flags_are_read_with_stepviews_own() -> None:
    own, rest = parse_own_args(
        ["--attach", "tcp://h:5570", "--attach-ranks", "0,2", "--api", "http://h:8000"]
    )
    assert (own.attach, own.attach_ranks, own.api, rest) == (
        "tcp://h:5570",
        (0, 2),
        "http://h:8000",
        [],
    )
    assert parse_own_args(["--attach-ranks", "3"])[0].attach_ranks == (0, 1, 2)
    assert parse_own_args([])[0].attach_ranks is None


@pytest.mark.parametrize(
    ("given", "nice"), [([], None), (["--nice", "0"], 0), (["--nice", "19"], 19)]
)
def test_nice_is_read_and_left_unset_when_not_given(given: list[str], nice: int | None) -> None:
    assert parse_own_args(["--attach", "tcp://h:1", *given])[0].nice == nice


@pytest.mark.parametrize("nice", ["-1", "20", "x"])
def test_bad_nice_is_a_usage_error(nice: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_own_args(["--attach", "tcp://h:1", "--nice", nice])
    assert exit_info.value.code == 2
    assert "--nice:" in capsys.readouterr().err


@pytest.mark.parametrize("ranks", ["0", "-1", "1,1", "a", "0,x"])
def test_bad_ranks_are_a_usage_error(ranks: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_own_args(["--attach", "tcp://h:1", "--attach-ranks", ranks])
    assert exit_info.value.code == 2
    assert "--attach-ranks:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--api", "http://h:8000"], "--api, --attach-ranks and --nice go with --attach"),
        (["--nice", "5"], "--api, --attach-ranks and --nice go with --attach"),
        (["--attach", "tcp://h:1", "--replay", "t.jsonl"], "--attach and --replay exclude"),
        (["--attach", "tcp://h:1", "--model", "m"], "takes no engine flags"),
        (["--attach", "tcp://h:1", "--prompts", "p.jsonl"], "--prompts with --attach needs --api"),
        (["--attach", "h:5570"], "--attach: 'h:5570' is not a tcp://HOST:PORT or ipc://PATH"),
        (["--attach", "tcp://h"], "needs a host and a port"),
        (["--attach", "tcp://h:1", "--api", "h:8000"], "--api: not an http(s) URL"),
        (["--api-key", "s3cret-k"], "--api-key goes with --attach ADDRESS --api URL"),
        (["--attach", "tcp://h:1", "--api-key", "s3cret-k"], "--api-key goes with --api URL"),
        (["--attach", "tcp://h:1", "--window", "30"], "--scrape-interval and --window go with"),
        (["--scrape-interval", "2"], "--scrape-interval and --window go with --attach http://"),
        (
            ["--attach", "http://h:8000", "--api", "http://h:8000", "--results", "r.jsonl"],
            "--api, --results: not with --attach http://HOST:PORT, which reads the server's",
        ),
        (["--attach", "http://h:8000", "--record", "t.jsonl"], "restart the server with"),
        (["--attach", "http://", "--api-key", "s3cret-k"], "--attach: not an http(s) URL"),
    ],
)
def test_mistakes_stop_before_anything_starts(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--log-file", str(tmp_path / "log"), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("stepview: ") and err.count("\n") == 1
    assert message in err
    assert "s3cret-k" not in err  # an API key is never shown, not even in a mistake


@pytest.mark.parametrize(
    ("flag", "value"), [("--scrape-interval", "0"), ("--window", "x"), ("--window", "inf")]
)
def test_bad_seconds_are_a_usage_error(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_own_args(["--attach", "http://h:8000", flag, value])
    assert exit_info.value.code == 2
    assert f"{flag}:" in capsys.readouterr().err


def test_addresses_stepview_can_subscribe_to() -> None:
    for good in ("tcp://127.0.0.1:5570", "tcp://[::1]:5570", "ipc:///tmp/x_dp1"):
        zmq_endpoint(good)
    for bad in ("tcp://h:0", "tcp://h:70000", "tcp://:5570", "udp://h:1", "ipc://"):
        with pytest.raises(ValueError):
            zmq_endpoint(bad)


ATTACH_IMPORTS = """
import sys
import stepview.cli, stepview.launch.attach, stepview.engine.watch.link.attached
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.model.address import plugin_records
AttachedEngine(plugin_records("ipc:///nonexistent/stepview.sock")).shutdown()
heavy = {"vllm", "torch", "transformers"}
print(",".join(sorted(n for n in sys.modules if n.split(".")[0] in heavy)))
"""


def test_attaching_needs_no_vllm() -> None:
    # A laptop watching a server through an ssh tunnel has no vLLM: a fresh interpreter
    # proves the attach path imports none of it (this process may have imported anything).
    result = subprocess.run(
        [sys.executable, "-c", ATTACH_IMPORTS],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout.strip() == ""


LOWERED = """
import os, threading
from stepview.launch.priority import lower_priority
before = os.nice(0)
lower_priority({nice})
seen = []
thread = threading.Thread(target=lambda: seen.append(os.nice(0)))
thread.start(); thread.join()
print(before, os.nice(0), seen[0])
"""


@pytest.mark.parametrize("nice", [0, 10])
def test_attached_stepview_runs_below_the_server_and_its_threads_too(nice: int) -> None:
    out = subprocess.run(
        [sys.executable, "-c", LOWERED.format(nice=nice)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    before, after, in_thread = map(int, out)
    assert after == in_thread == min(before + nice, 19)
