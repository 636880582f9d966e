"""Prometheus' ``file_sd`` format: target groups, read as the servers of a fleet.

The same file a Prometheus ``file_sd_configs`` entry reads (JSON, or YAML)::

    [{"targets": ["gpu-a:8000", "gpu-b:8000"], "labels": {"zone": "a", "model": "llama"}}]

A target is ``HOST[:PORT]`` (no port: 80, or 443 with ``__scheme__: https``, as Prometheus
2 adds); its group's labels go with it. Of the ``__`` labels, ``__scheme__`` (``http`` or
``https``) and ``__metrics_path__`` (which must end in ``/metrics``: what comes before it is
the server's path prefix, under which its API is read too) say where its page is, as they do
for Prometheus; the others are relabelling's and dropped. Each target is then watched as
``--attach SCHEME://HOST:PORT[PREFIX]`` would watch it.

Read as Prometheus reads it, so that stepview and Prometheus never see two fleets in one
file: the file's name says its syntax (Prometheus' ``discovery/file``: ``.json`` is JSON,
``.yml`` and ``.yaml`` are YAML, in lower or upper case; a file named otherwise is not a
file_sd file at all), never its content — a ``.json`` file holding YAML is refused, as
Prometheus refuses it. JSON as Go's ``encoding/json`` reads it into Prometheus' target groups
(label values strings, no ``NaN``; the two keys matched regardless of case); YAML as
``yaml.UnmarshalStrict`` does (a key given twice is an error; a scalar read as its text, so
``port: 8000`` is ``"8000"`` and ``v: 1.50`` is ``"1.50"``). Parsed as strictly as Prometheus
parses it (a label name it would refuse, a target with a scheme in it, a key it does not
know), each problem in one line that names the group and what to write instead: a file that
Prometheus would refuse is not silently half-read here. YAML needs PyYAML (a dependency of
stepview's since file_sd); without it, JSON still reads and a YAML file says what is missing.
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
JSON, YAML = "json", "yaml"
"""The two syntaxes of a file_sd file, told by its name (:func:`syntax_of`)."""
_SUFFIXES = {".json": JSON, ".JSON": JSON, ".yml": YAML, ".yaml": YAML, ".YML": YAML, ".YAML": YAML}
"""Prometheus' ``patFileSDName`` (``\\.(json|yml|yaml|JSON|YML|YAML)$``), then its reader's
lower-cased extension: ``.json`` is JSON, ``.yml``/``.yaml`` YAML."""
NOT_FILE_SD_NAME = (
    "Prometheus reads file_sd target groups only from a file named *.json, *.yml or *.yaml"
)


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


def syntax_of(name: str) -> str | None:
    """:data:`JSON` or :data:`YAML` for a file named ``name``, as Prometheus tells them;
    ``None``: Prometheus would not read it as file_sd at all."""
    for suffix, syntax in _SUFFIXES.items():
        if name.endswith(suffix):
            return syntax
    return None


def parse_target_groups(text: str, name: str, syntax: str | None = None) -> tuple[Target, ...]:
    """The targets of a file_sd text (``name``: the file, which the targets are
    ``listed_by`` and each message names), in the file's order, without repeats (a server
    listed twice keeps its first group's labels). ``syntax``: :data:`JSON` or :data:`YAML`,
    by default told by ``name`` (a name that tells neither is refused)."""
    syntax = syntax or syntax_of(name)
    if syntax is None:
        raise TargetGroupsError(f"{name}: {NOT_FILE_SD_NAME}")
    groups = _load_json(text, name) if syntax == JSON else _load_yaml(text, name)
    if groups is None:  # an empty YAML document, as Prometheus reads it: no group
        return ()
    if not isinstance(groups, list):
        raise TargetGroupsError(
            f'{name}: a file_sd file is a list of target groups ([{{"targets": [...], '
            f'"labels": {{...}}}}]), not a {_kind(groups)}'
        )
    found: dict[str, Target] = {}
    for number, group in enumerate(groups, 1):
        where = f"{name}: target group {number}"
        for target in _group(group, where, name, strings_only=syntax == JSON):
            found.setdefault(target.address, target)
    return tuple(found.values())


def _load_json(text: str, name: str) -> Any:
    """The JSON document, as Go reads it: ``NaN`` and ``Infinity`` are not JSON there."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    try:
        return json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        raise TargetGroupsError(
            f"{name}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise TargetGroupsError(f"{name}: not valid JSON ({exc})") from None


def _load_yaml(text: str, name: str) -> Any:
    """The YAML document, as ``yaml.UnmarshalStrict`` reads it into target groups."""
    try:
        import yaml
    except ImportError:
        raise TargetGroupsError(
            f"{name}: a YAML file needs PyYAML, which is not installed here "
            "(pip install pyyaml), or write the file as JSON (named .json)"
        ) from None
    from stepview.files.file_sd_yaml import MAX_FLOW_DEPTH, flow_depth, load_strict

    if flow_depth(text) > MAX_FLOW_DEPTH:
        raise TargetGroupsError(
            f"{name}: not valid YAML here (brackets nested deeper than {MAX_FLOW_DEPTH})"
        )
    try:
        return load_strict(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise TargetGroupsError(f"{name}: not valid YAML ({where}{problem})") from None
    except RecursionError:
        raise TargetGroupsError(f"{name}: not valid YAML (nested too deep)") from None


def _group(group: Any, where: str, name: str, *, strings_only: bool) -> list[Target]:
    """One target group's targets, with its labels (``strings_only``: JSON's label values,
    which Go reads into strings only)."""
    if not isinstance(group, dict):
        raise TargetGroupsError(
            f'{where}: a group is a mapping with "targets" and "labels", not a {_kind(group)}'
        )
    if strings_only:  # Go's encoding/json matches a struct's keys regardless of case
        group = {_json_key(key): value for key, value in group.items()}
    unknown = sorted(str(key) for key in group if key not in GROUP_KEYS)
    if unknown:
        raise TargetGroupsError(
            f'{where}: unknown key {", ".join(map(repr, unknown))} (a group has "targets" '
            'and "labels" only)'
        )
    labels = _labels(group.get("labels") or {}, where, strings_only)
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


def _json_key(key: str) -> str:
    folded = key.lower()
    return folded if folded in GROUP_KEYS else key


def _labels(labels: Any, where: str, strings_only: bool) -> dict[str, str]:
    """A group's labels, checked by Prometheus' rules: names ``[a-zA-Z_][a-zA-Z0-9_]*``,
    values strings (YAML's scalars all read as their text, as Go reads them; null is
    empty); ``strings_only`` changes nothing since YAML's scalars are text already, and
    says why a JSON number is refused: Go refuses it."""
    if not isinstance(labels, dict):
        raise TargetGroupsError(f'{where}: "labels" must be a mapping of names to values')
    checked: dict[str, str] = {}
    for key, value in labels.items():
        if not isinstance(key, str) or not LABEL_NAME.fullmatch(key):
            raise TargetGroupsError(
                f"{where}: {key!r} is not a label name (letters, digits and _, not first a digit)"
            )
        if value is None:  # Go's zero value, in JSON as in YAML
            value = ""
        if not isinstance(value, str):
            raise TargetGroupsError(f"{where}: label {key}'s value must be a string")
        checked[key] = value
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
