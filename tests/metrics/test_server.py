"""The endpoint and its flags: served over HTTP in Prometheus' text format, on loopback by
default, a port it cannot have is one line and exit code 2 before anything starts."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stepview.cli import main
from stepview.cli.args import help_parser, parse_own_args
from stepview.metrics.exporter import MetricsExporter
from stepview.metrics.server import MetricsServer, MetricsUnavailable


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something else listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def test_serves_the_registry_and_lets_the_port_go() -> None:
    exporter = MetricsExporter()
    server = MetricsServer(exporter.metrics.registry, "127.0.0.1", 0)
    try:
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(server.url, timeout=5) as answer:
            text = answer.read().decode()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        assert families["stepview_preemptions"].type == "counter"
        assert families["stepview_waiting_requests"].type == "gauge"
        assert "process_resident_memory_bytes" in families  # how big a long watch grows
        assert families["stepview_view_behind_seconds"].documentation.startswith("How far")
    finally:
        server.stop()
        server.join(5)
    # Released: the next run can have it (while the last scrape's connection lingers).
    again = MetricsServer(exporter.metrics.registry, "127.0.0.1", server.port)
    again.stop()
    again.join(5)


def test_a_port_in_use_is_one_line(busy_port: int) -> None:
    with pytest.raises(MetricsUnavailable) as error:
        MetricsServer(MetricsExporter().metrics.registry, "127.0.0.1", busy_port)
    assert str(error.value) == f"cannot serve metrics on 127.0.0.1:{busy_port}: address in use"


def test_an_unknown_host_is_one_line() -> None:
    with pytest.raises(MetricsUnavailable, match=r"cannot serve metrics on no\.such\.host:0: "):
        MetricsServer(MetricsExporter().metrics.registry, "no.such.host", 0)


def test_a_port_in_use_stops_a_watch_before_it_starts(
    busy_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.jsonl"
    args = ["--attach", f"ipc://{tmp_path / 'nobody.sock'}", "--headless", "--nice", "0"]
    args += ["--metrics-port", str(busy_port), "--results", str(results)]
    code = main([*args, "--log-file", str(tmp_path / "log.txt")])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"stepview: cannot serve metrics on 127.0.0.1:{busy_port}: address in use\n"
    assert not results.exists()  # nothing opened, nothing left behind


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metrics-host", "0.0.0.0"], "--metrics-host goes with --metrics-port PORT"),
        (["--replay", "t.jsonl", "--metrics-port", "9100"], "a replay has none"),
    ],
)
def test_flags_that_do_not_go_together(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("port", ["-1", "65536", "http"])
def test_bad_ports_are_a_usage_error(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_own_args(["--metrics-port", port])
    assert exit_info.value.code == 2
    assert "--metrics-port:" in capsys.readouterr().err


def test_loopback_unless_told_otherwise() -> None:
    own, rest = parse_own_args(["--metrics-port", "0"])
    assert (own.outputs["metrics_port"], own.outputs["metrics_host"], rest) == (0, None, [])
    text = " ".join(help_parser().format_help().split())
    assert "--metrics-host HOST" in text and "default: 127.0.0.1" in text
