"""An address is parsed once, into a value (:mod:`stepview.model.address`): what it names is
asked of the value, never worked out again from its text below the command line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stepview.model.address import (
    IPC,
    TCP,
    Discovery,
    MetricsUrl,
    PluginRecords,
    ZmqEndpoint,
    listed_address,
    plugin_records,
    watch_address,
    zmq_endpoint,
)
from tests.helpers import ROOT

# What telling an address's kind from its text looks like (each seen in the tree before).
CLASSIFYING = re.compile(
    r"""startswith\(\(?["'](?:https?|tcp|ipc|prometheus)"""
    r"""|["'](?:tcp|ipc|https?)://["'] in """
    r"""|partition\(["']://["']\)"""
    r"""|removeprefix\(["'](?:tcp|ipc)://"""
    r"""|is_metrics_address\(|is_prometheus_address\(|rank_address\("""
)
ALLOWED = {Path("stepview/model/address.py")}
"""The one module that reads an address's text; the command line (``stepview/cli/``) hands
what it parses to everything else."""


def test_no_module_below_the_command_line_classifies_an_address_from_its_text() -> None:
    found = []
    for path in sorted((ROOT / "stepview").rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative in ALLOWED or relative.parts[:2] == ("stepview", "cli"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CLASSIFYING.search(line):
                found.append(f"{relative}:{number}: {line.strip()}")
    assert not found, "parse it once, in stepview/model/address.py:\n" + "\n".join(found)


def test_the_pattern_finds_what_it_is_for() -> None:
    # The check above can fail: each way of doing it that the tree once had is caught.
    for line in (
        'keys = watch_keys() if "tcp://" in address else None',
        'return address.lower().startswith(("http://", "https://"))',
        'scheme, sep, rest = base.partition("://")',
        'if not address.startswith("tcp://"):',
        "if is_metrics_address(own.attach):",
    ):
        assert CLASSIFYING.search(line), line


def test_each_kind_of_address_is_its_own_value() -> None:
    assert watch_address("http://h:8000") == MetricsUrl("http://h:8000")
    assert watch_address("HTTPS://h/v") == MetricsUrl("HTTPS://h/v")
    records = watch_address("tcp://h:5570", (0, 2))
    assert records == PluginRecords(ZmqEndpoint(TCP, "h", 5570), (0, 2))
    assert isinstance(records, PluginRecords)
    assert [(rank, e.text) for rank, e in records.endpoints()] == [
        (0, "tcp://h:5570"),
        (2, "tcp://h:5572"),
    ]
    assert plugin_records("ipc:///s", (1,)).endpoints() == ((1, ZmqEndpoint(IPC, path="/s_dp1")),)
    listing = listed_address("prometheus://p?job=vllm")
    assert isinstance(listing, Discovery) and listing.jobs == ("vllm",)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("h:5570", "'h:5570' is not a tcp://HOST:PORT or ipc://PATH address"),
        ("tcp://h", "'tcp://h' needs a host and a port: tcp://HOST:PORT"),
        ("http://", "not an http(s) URL: 'http://'"),
    ],
)
def test_an_address_that_cannot_be_used_says_why(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        watch_address(text)


def test_a_rank_past_the_last_port_is_refused_when_parsed() -> None:
    with pytest.raises(ValueError, match="'tcp://h:65536' needs a host and a port"):
        plugin_records("tcp://h:65535", (0, 1))


@pytest.mark.parametrize(
    ("text", "loopback"),
    [
        ("tcp://127.0.0.1:1", True),
        ("tcp://[::1]:1", True),
        ("ipc:///x", True),
        ("tcp://*:1", False),
        ("tcp://0.0.0.0:1", False),
        ("tcp://gpu:1", False),
    ],
)
def test_who_can_reach_an_endpoint(text: str, loopback: bool) -> None:
    assert zmq_endpoint(text).loopback is loopback
