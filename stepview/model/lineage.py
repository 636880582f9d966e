"""Where a request came from: a clone or a fork of another request, as plain data.

A *clone* re-runs a request's prompt with parameters the user may change (an A/B pair); a
*fork* continues a request from one of its generated tokens: its prompt is the parent's prompt
plus the completion's text up to and including that token. The new request keeps a
:class:`Lineage` naming its parent, so the panes, the detail view, the results file and
``--headless --json`` can say ``clone of r3`` or ``fork of r3 @ token 17``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple


class LineageKind(StrEnum):
    CLONE = "clone"
    FORK = "fork"


class Lineage(NamedTuple):
    """A request's parent, and how it was derived from it."""

    parent: str
    kind: LineageKind
    completion: int = 0  # fork: which of the parent's samples it continues
    token: int | None = None  # fork: position (0-based) of the last generated token kept

    def label(self) -> str:
        """``clone of r3``, ``fork of r3 @ token 17`` (``… of sample 1`` when n > 1)."""
        text = f"{self.kind.value} of {self.parent}"
        if self.kind is LineageKind.FORK:
            text += f" @ token {self.token}"
            if self.completion:
                text += f" of sample {self.completion}"
        return text

    def to_record(self) -> dict[str, Any]:
        """JSON-ready, for the results file and ``--headless --json``."""
        return {
            "kind": self.kind.value,
            "completion": self.completion,
            "token": self.token,
        }
