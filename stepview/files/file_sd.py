"""Prometheus' ``file_sd`` format: target groups, read as the servers of a fleet.

The same file a Prometheus ``file_sd_configs`` entry reads (JSON, or YAML)::

    [{"targets": ["gpu-a:8000", "gpu-b:8000"], "labels": {"zone": "a", "model": "llama"}}]

A target is ``HOST[:PORT]`` (no port: 80, or 443 with ``__scheme__: https``, as Prometheus
2 adds); its group's labels go with it. Of the ``__`` labels, ``__scheme__`` (``http`` or
``https``) and ``__metrics_path__`` (which must end in ``/metrics``: what comes before it is
the server's path prefix, under which its API is read too) say where its page is, as they do
for Prometheus; the others are relabelling's and dropped. Each target is then watched as
``--attach SCHEME://HOST:PORT[PREFIX]`` would watch it.

Parsed as strictly as Prometheus parses it (a label name it would refuse, a target with a
scheme in it, a key it does not know), each problem in one line that names the group and what
to write instead: a file that Prometheus would refuse is not silently half-read here.
YAML needs PyYAML (a dependency of stepview's since file_sd); without it, JSON still reads and
a YAML file says what is missing.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any

from stepview.model.address import MetricsUrl
from stepview.model.targets import Labels, Target, labels_of

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
"""Prometheus' rule for a label name."""
GROUP_KEYS = frozenset({"targets", "labels"})
SCHEMES = ("http", "https")
METRICS = "/metrics"


class TargetGroupsError(ValueError):
    """A file_sd text that cannot be read; the message says where and why, in one line."""


def looks_like_target_groups(text: str) -> bool:
    """Whether ``text`` is meant as target groups (JSON or YAML) rather than the plain list
    of ``--attach`` addresses: its first line that is not blank or a ``#`` comment opens a
    list or a mapping (``[``, ``{``, ``- ``). An address never starts so."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped == "---":
            continue
        return stripped[0] in "[{" or stripped == "-" or stripped.startswith("- ")
    return False


def parse_target_groups(text: str, name: str) -> tuple[Target, ...]:
    """The targets of a file_sd text (``name``: the file, which the targets are
    ``listed_by`` and each message names), in the file's order, without repeats (a server
    listed twice keeps its first group's labels)."""
    groups = _load(text, name)
    if groups is None:  # an empty YAML document, as Prometheus reads it: no group
        return ()
    if not isinstance(groups, list):
        raise TargetGroupsError(
            f'{name}: a file_sd file is a list of target groups ([{{"targets": [...], '
            f'"labels": {{...}}}}]), not a {_kind(groups)}'
        )
    found: dict[str, Target] = {}
    for number, group in enumerate(groups, 1):
        for target in _group(group, f"{name}: target group {number}", name):
            found.setdefault(target.address, target)
    return tuple(found.values())


def _load(text: str, name: str) -> Any:
    """The decoded document: JSON when it reads as JSON, YAML otherwise (as Prometheus picks
    by the file's extension; YAML reads JSON too, so only the message depends on it)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        json_error = f"{name}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
    try:
        import yaml
    except ImportError:
        raise TargetGroupsError(
            f"{json_error}; a YAML file needs PyYAML, which is not installed here "
            "(pip install pyyaml), or write the file as JSON"
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        if name.lower().endswith(".json"):
            raise TargetGroupsError(json_error) from None
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise TargetGroupsError(f"{name}: not valid YAML ({where}{problem})") from None


def _group(group: Any, where: str, name: str) -> list[Target]:
    """One target group's targets, with its labels."""
    if not isinstance(group, dict):
        raise TargetGroupsError(
            f'{where}: a group is a mapping with "targets" and "labels", not a {_kind(group)}'
        )
    unknown = sorted(str(key) for key in group if key not in GROUP_KEYS)
    if unknown:
        raise TargetGroupsError(
            f'{where}: unknown key {", ".join(map(repr, unknown))} (a group has "targets" '
            'and "labels" only)'
        )
    labels = _labels(group.get("labels") or {}, where)
    scheme = labels.get("__scheme__", "http")
    if scheme not in SCHEMES:
        raise TargetGroupsError(f"{where}: __scheme__ must be http or https, not {scheme!r}")
    path = labels.get("__metrics_path__", METRICS)
    if not (path.startswith("/") and path.endswith(METRICS)):
        raise TargetGroupsError(
            f"{where}: __metrics_path__ {path!r} must end in /metrics: stepview reads vLLM's "
            "/metrics (and its API beside it, under the same prefix)"
        )
    targets = group.get("targets")
    if targets is None:
        targets = []
    if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        raise TargetGroupsError(f'{where}: "targets" must be a list of "HOST:PORT" strings')
    kept = labels_of(labels)
    prefix = path[: -len(METRICS)]
    return [_target(target, scheme, prefix, kept, where, name) for target in targets]


def _labels(labels: Any, where: str) -> dict[str, str]:
    """A group's labels, checked by Prometheus' rules: names ``[a-zA-Z_][a-zA-Z0-9_]*``,
    values plain scalars (YAML's ``port: 8000`` is the string ``"8000"``, as Go reads it)."""
    if not isinstance(labels, dict):
        raise TargetGroupsError(f'{where}: "labels" must be a mapping of names to values')
    checked: dict[str, str] = {}
    for key, value in labels.items():
        if not isinstance(key, str) or not LABEL_NAME.fullmatch(key):
            raise TargetGroupsError(
                f"{where}: {key!r} is not a label name (letters, digits and _, not first a digit)"
            )
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise TargetGroupsError(f"{where}: label {key}'s value must be a string")
        checked[key] = str(value)
    return checked


def _target(text: str, scheme: str, prefix: str, labels: Labels, where: str, name: str) -> Target:
    """``HOST[:PORT]`` as the address a watch reads (``SCHEME://HOST:PORT[PREFIX]``)."""
    target = text.strip()
    if "://" in target or "/" in target:
        raise TargetGroupsError(
            f"{where}: target {text!r}: a file_sd target is HOST:PORT (the scheme goes in the "
            "__scheme__ label, the path in __metrics_path__)"
        )
    try:
        parts = urllib.parse.urlsplit(f"//{target}")
        port = parts.port
    except ValueError:
        port, parts = None, None
    if parts is None or not parts.hostname:
        raise TargetGroupsError(f"{where}: target {text!r} is not HOST:PORT")
    if port is None:  # Prometheus 2 adds the scheme's port
        target = f"{target}:{443 if scheme == 'https' else 80}"
    return Target(MetricsUrl(f"{scheme}://{target}{prefix}"), labels, name)


def _kind(value: Any) -> str:
    """What a decoded value is, in the file's words."""
    names = {dict: "mapping", list: "list", str: "string", type(None): "null"}
    return names.get(type(value), type(value).__name__)
