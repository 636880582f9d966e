"""A file_sd YAML file read as Prometheus reads it: Go's ``yaml.UnmarshalStrict`` (yaml.v2).

Two ways PyYAML's ``safe_load`` reads a file otherwise, and so would list another fleet than
Prometheus does from the same file:

* **A key given twice** (two ``targets:`` in a group, a label twice) is an error for
  ``UnmarshalStrict``; PyYAML keeps the last one.
* **Scalars**: Prometheus reads every field of a target group into a Go string, and yaml.v2
  puts a scalar's own text in a string whatever it resolves to (``port: 8000`` is ``"8000"``,
  ``v: 1.50`` is ``"1.50"``, ``on: yes`` is ``"yes"``, ``n: 0x1F`` is ``"0x1F"``); PyYAML
  would make them ``8000``, ``1.5``, ``True`` and ``31``. Only null stays null (Go's zero
  value: empty).

Imported only when a YAML file is read: PyYAML is optional for JSON files.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

_KEPT_TAGS = ("tag:yaml.org,2002:null", "tag:yaml.org,2002:merge")
"""The implicit resolutions yaml.v2 makes for a string field too: null, and ``<<`` merges."""


class _StrictLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no types here
    """``SafeLoader`` resolving no plain scalar but null (and ``<<``), refusing repeated keys."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                repeated = key in seen
            except TypeError:  # an unhashable key: the base class says so
                break
            if repeated:
                raise ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found the key {key!r} twice",
                    key_node.start_mark,
                )
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag in _KEPT_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


MAX_FLOW_DEPTH = 64
"""The deepest ``[``/``{`` nesting read. A file_sd file needs 3; PyYAML takes time that grows
with the square of the depth (12 000 ``[`` took minutes: a start that never ends)."""


def flow_depth(text: str) -> int:
    """How deep ``text``'s brackets nest, counted as if none were quoted (a bound, cheap)."""
    depth = deepest = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}" and depth:
            depth -= 1
    return deepest


def load_strict(text: str) -> Any:
    """The one YAML document of ``text`` (``None``: empty); raises ``yaml.YAMLError``."""
    return yaml.load(text, Loader=_StrictLoader)
