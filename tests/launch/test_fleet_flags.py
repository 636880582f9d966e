"""Several servers: ``--attach`` repeated, a comma list, ``--attach-file``; one is no fleet.
Servers found where they are listed: ``--attach prometheus://``, a file_sd ``--attach-file``
(a fleet even when it lists one server: a listing can grow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepview.cli import main
from stepview.cli.args import parse_own_args
from stepview.model.targets import FILE_SD, PROMETHEUS, Discovery


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
        (
            ["--attach", "prometheus://p:9090", "--record", "t.jsonl"],
            "--record: not with a fleet listed by prometheus://p:9090; attach to one server",
        ),
        (
            ["--attach", "prometheus://p:9090?jobs=vllm"],
            "--attach: prometheus://p:9090?jobs=vllm: unknown 'jobs' (prometheus://HOST:PORT "
            "takes ?job=NAME only)",
        ),
        (["--attach", "prometheus://p:http"], "--attach: 'prometheus://p:http' is not a"),
        (["--attach", "prometheus://p?job="], "?job= names no job"),
        (["--attach", "prometheus://p", "--load", "3"], "--load runs on an engine of stepview's"),
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


def test_prometheus_is_a_listing_followed_whatever_it_lists() -> None:
    own = parse_own_args(["--attach", "prometheus://prom:9091/p?job=vllm&job=vllm-b"])[0]
    assert own.fleet == () and own.is_fleet
    assert own.discovery == (
        Discovery(
            PROMETHEUS,
            "http://prom:9091/p",
            "prometheus://prom:9091/p?job=vllm&job=vllm-b",
            ("vllm", "vllm-b"),
        ),
    )
    assert own.attach == "prometheus://prom:9091/p?job=vllm&job=vllm-b"
    # Prometheus' own port when none is given; no job: every target with vLLM's series.
    (found,) = parse_own_args(["--attach", "http://a:8000,prometheus://prom"])[0].discovery
    assert (found.location, found.jobs) == ("http://prom:9090", ())


def test_a_file_sd_file_is_a_fleet_even_of_one(tmp_path: Path) -> None:
    listed = tmp_path / "targets.yml"
    listed.write_text("- targets: [gpu-a:8000]\n  labels: {zone: a}\n")
    own = parse_own_args(["--attach", "http://b:8000", "--attach-file", str(listed)])[0]
    assert own.fleet == ("http://b:8000",)
    assert own.discovery == (Discovery(FILE_SD, str(listed), str(listed)),)
    alone = parse_own_args(["--attach-file", str(listed)])[0]
    assert alone.is_fleet and alone.attach == str(listed)


def test_a_bad_file_sd_file_stops_the_command_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = tmp_path / "targets.json"
    listed.write_text('[{"targets": ["http://gpu-a:8000"]}]')
    with pytest.raises(SystemExit) as raised:
        main(["--log-file", str(tmp_path / "log"), "--attach-file", str(listed)])
    assert raised.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"stepview: --attach-file: {listed}: target group 1: target 'http://gpu-a:8000': a "
        "file_sd target is HOST:PORT (the scheme goes in the __scheme__ label, the path in "
        "__metrics_path__); see 'stepview --help'"
    )
