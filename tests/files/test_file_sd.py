"""``--attach-file`` in Prometheus' file_sd format: JSON and YAML target groups, their labels,
the format told by content, strict parsing with one-line messages, and the file followed."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from stepview.files.file_sd import (
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
YAML = """\
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
    assert parse_target_groups(json.dumps(GROUPS), "s") == EXPECTED
    assert parse_target_groups(YAML, "s") == EXPECTED


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
        ("- targets: [a:1]\n  label: {x: y}\n", "target group 1: unknown key 'label'"),
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
    assert parse_target_groups(json.dumps(GROUPS), "s") == EXPECTED
    with pytest.raises(TargetGroupsError, match="needs PyYAML, which is not installed here"):
        parse_target_groups(YAML, "s")


def test_the_attach_file_is_read_in_either_format(tmp_path: Path) -> None:
    plain = tmp_path / "servers"
    plain.write_text("# replicas\nhttp://a:8000\n\ntcp://c:5570\n")
    assert read_attach_file(plain).addresses == ("http://a:8000", "tcp://c:5570")
    assert read_attach_file(plain).discovery is None
    listed = tmp_path / "targets.yml"
    listed.write_text(YAML)
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
