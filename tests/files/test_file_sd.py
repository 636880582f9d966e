"""``--attach-file`` in Prometheus' file_sd format: JSON and YAML target groups, their labels,
the format told by content, strict parsing with one-line messages, and the file followed."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from stepview.files.file_sd import (
    JSON,
    YAML,
    TargetGroupsError,
    looks_like_target_groups,
    parse_target_groups,
)
from stepview.files.targets_file import FileFinder, TargetsFileError, read_attach_file
from stepview.model.address import MetricsUrl
from stepview.model.targets import FILE_SD, Discovery, Target

GROUPS = [
    {"targets": ["gpu-a:8000", "gpu-b:8000"], "labels": {"zone": "a", "model": "llama"}},
    {
        "targets": ["gpu-c:8443"],
        "labels": {
            "__scheme__": "https",
            "__metrics_path__": "/vllm-c/metrics",
            "__meta_rack": "r7",
            "zone": "b",
        },
    },
    {"targets": ["gpu-a:8000", "gpu-d"]},  # gpu-a again: its first group's labels stay
]
YAML_TEXT = """\
# our replicas, as Prometheus reads them
- targets:
    - gpu-a:8000
    - gpu-b:8000
  labels:
    zone: a
    model: llama
- targets: ["gpu-c:8443"]
  labels: {__scheme__: https, __metrics_path__: /vllm-c/metrics, __meta_rack: r7, zone: b}
- targets: [gpu-a:8000, gpu-d]
"""
EXPECTED = (
    Target(MetricsUrl("http://gpu-a:8000"), (("model", "llama"), ("zone", "a")), "s"),
    Target(MetricsUrl("http://gpu-b:8000"), (("model", "llama"), ("zone", "a")), "s"),
    # https, and the path before /metrics is the server's prefix; __ labels are not kept.
    Target(MetricsUrl("https://gpu-c:8443/vllm-c"), (("zone", "b"),), "s"),
    Target(
        MetricsUrl("http://gpu-d:80"), (), "s"
    ),  # no port: Prometheus 2's default for the scheme
)


def test_json_and_yaml_read_alike_with_their_labels() -> None:
    assert parse_target_groups(json.dumps(GROUPS), "s", JSON) == EXPECTED
    assert parse_target_groups(YAML_TEXT, "s", YAML) == EXPECTED


@pytest.mark.parametrize(
    ("text", "groups"),
    [
        ("http://a:8000\n# b\ntcp://c:5570\n", False),
        ("# comment\n\n[]\n", True),
        ('{"targets": []}', True),
        ("---\n- targets: [a:1]\n", True),
        ("-\n  targets: [a:1]\n", True),
        ("", False),
    ],
)
def test_the_format_is_told_by_content(text: str, groups: bool) -> None:
    assert looks_like_target_groups(text) is groups


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"targets": ["a:1"]', "servers.json: not valid JSON (line 1 column 21: Expecting ','"),
        ('{"targets": ["a:1"]}', "a list of target groups ("),
        ('[{"targets": ["a:1"], "label": {"x": "y"}}]', "target group 1: unknown key 'label'"),
        ('[{"targets": "a:1"}]', 'target group 1: "targets" must be a list of "HOST:PORT"'),
        ('[{"targets": ["http://a:8000"]}]', "the scheme goes in the __scheme__ label"),
        ('[{"targets": ["a:port"]}]', "target 'a:port' is not HOST:PORT"),
        ('[{"targets": ["a:1"], "labels": {"1zone": "a"}}]', "'1zone' is not a label name"),
        ('[{"targets": ["a:1"], "labels": {"zone": ["a"]}}]', "label zone's value must be a"),
        ('[{"targets": ["a:1"], "labels": {"__scheme__": "ftp"}}]', "http or https, not 'ftp'"),
        (
            '[{"targets": ["a:1"], "labels": {"__metrics_path__": "/stats"}}]',
            "__metrics_path__ '/stats' must end in /metrics",
        ),
        ("[1]", "target group 1: a group is a mapping"),
    ],
)
def test_a_bad_file_says_where_and_why_in_one_line(text: str, message: str) -> None:
    with pytest.raises(TargetGroupsError) as raised:
        parse_target_groups(text, "servers.json")
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert str(raised.value).startswith("servers.json: ")


def test_bad_yaml_names_the_line() -> None:
    with pytest.raises(TargetGroupsError, match=r"servers.yml: not valid YAML \(line 2 column"):
        parse_target_groups("- targets: [a:1\n- labels: {}\n", "servers.yml")


def test_without_pyyaml_json_still_reads_and_yaml_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml fails, as if not installed
    assert parse_target_groups(json.dumps(GROUPS), "s", JSON) == EXPECTED
    with pytest.raises(TargetGroupsError, match="needs PyYAML, which is not installed here"):
        parse_target_groups(YAML_TEXT, "s", YAML)


def test_the_attach_file_is_read_in_either_format(tmp_path: Path) -> None:
    plain = tmp_path / "servers"
    plain.write_text("# replicas\nhttp://a:8000\n\ntcp://c:5570\n")
    assert read_attach_file(plain).addresses == ("http://a:8000", "tcp://c:5570")
    assert read_attach_file(plain).discovery is None
    listed = tmp_path / "targets.yml"
    listed.write_text(YAML_TEXT)
    found = read_attach_file(listed)
    assert found.discovery == Discovery(FILE_SD, str(listed), str(listed))
    assert [t.address for t in found.targets] == [t.address for t in EXPECTED]
    assert found.addresses == ()
    empty = tmp_path / "empty"
    empty.write_text("# nothing yet\n")
    with pytest.raises(TargetsFileError, match="names no server"):
        read_attach_file(empty)


def write(path: Path, groups: object) -> None:
    """Replace the file whole, as Prometheus' docs advise (a rename: no half-written file)."""
    new = path.with_suffix(".new")
    new.write_text(json.dumps(groups))
    os.replace(new, path)


def test_a_followed_file_answers_when_it_changed_and_keeps_quiet_otherwise(
    tmp_path: Path,
) -> None:
    path = tmp_path / "targets.json"
    write(path, [{"targets": ["a:1"], "labels": {"zone": "a"}}])
    finder = FileFinder(Discovery(FILE_SD, str(path), "targets.json"))
    assert finder.poll() == (Target(MetricsUrl("http://a:1"), (("zone", "a"),), "targets.json"),)
    assert finder.poll() is None  # unchanged
    write(path, [{"targets": ["a:1", "b:2"]}])
    assert [t.address for t in finder.poll() or ()] == ["http://a:1", "http://b:2"]
    # Being written: empty. Not "no server": nothing is answered, and it is looked at again.
    path.write_text("")
    assert finder.poll() is None
    path.write_text('[{"targets": ["b:2"]')  # half written: a problem, read again next time
    with pytest.raises(TargetsFileError, match="not valid JSON"):
        finder.poll()
    with open(path, "a") as out:
        out.write("}]")
    assert [t.address for t in finder.poll() or ()] == ["http://b:2"]
    path.write_text("http://b:2\n")  # the plain format: a file followed keeps its format
    with pytest.raises(TargetsFileError, match="no longer a file_sd list"):
        finder.poll()
    path.unlink()
    with pytest.raises(TargetsFileError, match="cannot read"):
        finder.poll()


# -- read as Prometheus reads it: the name says the syntax, Go's readers say the values ------


@pytest.mark.parametrize(
    ("name", "syntax"),
    [
        ("targets.json", JSON),
        ("targets.JSON", JSON),
        ("targets.yml", YAML),
        ("targets.yaml", YAML),
        ("targets.YAML", YAML),
        ("/etc/prometheus/.json", JSON),  # Prometheus' pattern takes a bare extension too
        ("targets.Json", None),  # its pattern: all lower or all upper case
        ("targets.txt", None),
        ("targets", None),
        ("targets.json.bak", None),
    ],
)
def test_the_syntax_is_told_by_the_name_as_prometheus_tells_it(
    name: str, syntax: str | None
) -> None:
    from stepview.files.file_sd import syntax_of

    assert syntax_of(name) == syntax


def test_a_json_file_holding_yaml_is_refused_as_prometheus_refuses_it(tmp_path: Path) -> None:
    """The issue's case: YAML in a file named .json was taken as a fleet; Prometheus, which
    reads a .json file with Go's JSON reader, lists nothing from it."""
    listed = tmp_path / "targets.json"
    listed.write_text(YAML_TEXT)
    with pytest.raises(TargetsFileError, match=r"targets.json: not valid JSON \(line 1 column 1"):
        read_attach_file(listed)
    listed.write_text(json.dumps(GROUPS))
    assert [t.address for t in read_attach_file(listed).targets] == [t.address for t in EXPECTED]


def test_target_groups_in_a_file_prometheus_would_not_read_are_refused(tmp_path: Path) -> None:
    """Named neither .json nor .y(a)ml, a file is the plain list; one that holds target groups
    is refused with the name to give it (Prometheus would not read it as file_sd at all)."""
    for name, text in (("targets.txt", json.dumps(GROUPS)), ("targets", YAML_TEXT)):
        listed = tmp_path / name
        listed.write_text(text)
        with pytest.raises(TargetsFileError) as raised:
            read_attach_file(listed)
        assert str(raised.value) == (
            f"{listed} holds target groups, but Prometheus reads file_sd target groups only "
            "from a file named *.json, *.yml or *.yaml (rename it so; a plain list of "
            "addresses is one per line)"
        )
    plain = tmp_path / "servers.txt"
    plain.write_text("http://a:8000\n")
    assert read_attach_file(plain).addresses == ("http://a:8000",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # Go's encoding/json reads label values into strings: a number is an error there.
        ('[{"targets": ["a:1"], "labels": {"port": 8000}}]', "label port's value must be a"),
        ('[{"targets": ["a:1"], "labels": {"x": NaN}}]', "not valid JSON (NaN is not JSON)"),
    ],
)
def test_json_is_read_as_gos_json_reader_reads_it(text: str, message: str) -> None:
    with pytest.raises(TargetGroupsError) as raised:
        parse_target_groups(text, "servers.json")
    assert message in str(raised.value)


def test_json_keys_match_regardless_of_case_as_in_go() -> None:
    found = parse_target_groups('[{"Targets": ["a:1"], "LABELS": {"zone": "a"}}]', "s.json")
    assert found == (Target(MetricsUrl("http://a:1"), (("zone", "a"),), "s.json"),)


def test_yaml_is_read_as_gos_strict_yaml_reader_reads_it() -> None:
    """Scalars read as their text (yaml.v2 into a string field), null as empty, and a key
    given twice refused (UnmarshalStrict); PyYAML's safe_load differs on each."""
    text = "- targets: [a:1]\n  labels: {port: 8000, v: 1.50, on: yes, n: 0x1F, gone: ~}\n"
    (target,) = parse_target_groups(text, "s.yml")
    assert dict(target.labels) == {
        "port": "8000",
        "v": "1.50",
        "on": "yes",
        "n": "0x1F",
        "gone": "",
    }
    with pytest.raises(TargetGroupsError, match="found the key 'targets' twice"):
        parse_target_groups("- targets: [a:1]\n  targets: [b:2]\n", "s.yml")
    with pytest.raises(TargetGroupsError, match="found the key 'zone' twice"):
        parse_target_groups("- targets: [a:1]\n  labels: {zone: a, zone: b}\n", "s.yaml")
