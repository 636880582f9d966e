"""Which fleet rows are shown, in what order: the fleet screen's sort (``s``) and filter (``/``).

At 64 servers the table is taller than any terminal, so the question "which server is in
trouble" needs the rows ordered by the figure that says it, and "where is gpu-17" needs them
narrowed by text. Both are decided here, on :class:`~stepview.insight.fleet.FleetRow` alone,
so the screen only draws what it is given and the rule is one definition a test can hold.

The sorts, in the order ``s`` cycles them (:data:`SORTS`): as listed (the command line's or the
listing's order, the default), by address, then by the figures that say a server is loaded or
slow, worst first: waiting, KV cache use, generated tokens per second, TTFT p99. A server with
no figure yet (``None``: no token in the window, no request finished) goes after those that
have one; ties keep the address order, so rows with equal figures do not swap on every poll.

The filter keeps the rows whose address or labels (``name=value``, as the screen shows them)
contain the text, case-insensitively: ``zone=b``, ``gpu-1``, ``:8001`` all work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from stepview.insight.fleet import FleetRow
from stepview.model.targets import label_text

LISTED: Final = "listed"
SORTS: Final = (LISTED, "server", "waiting", "KV", "tok/s", "TTFT p99")
"""The sort keys ``s`` cycles through, named as the columns they sort by."""

_LAST = float("inf")  # a figure not known yet sorts after every known one


def _worst_first(figure: Callable[[FleetRow], float | None]) -> Callable[[FleetRow], float]:
    def key(row: FleetRow) -> float:
        value = figure(row)
        return _LAST if value is None else -value

    return key


_KEYS: Final[dict[str, Callable[[FleetRow], float]]] = {
    "waiting": _worst_first(lambda row: row.waiting),
    "KV": _worst_first(lambda row: row.kv_cache_usage),
    "tok/s": _worst_first(lambda row: row.tokens_per_s),
    "TTFT p99": _worst_first(lambda row: row.ttft_p99),
}


def next_sort(sort: str) -> str:
    """The sort after ``sort`` in :data:`SORTS` (the last one wraps to the first)."""
    return SORTS[(SORTS.index(sort) + 1) % len(SORTS)]


def ordered(rows: Sequence[FleetRow], sort: str) -> list[FleetRow]:
    """``rows`` in the order of ``sort`` (one of :data:`SORTS`)."""
    if sort == LISTED:
        return list(rows)
    by_address = sorted(rows, key=lambda row: row.address)
    key = _KEYS.get(sort)
    return by_address if key is None else sorted(by_address, key=key)  # stable: ties by address


def matching(rows: Sequence[FleetRow], text: str) -> list[FleetRow]:
    """The rows whose address or labels contain ``text`` (any case); all of them for ``""``."""
    wanted = text.strip().lower()
    if not wanted:
        return list(rows)
    return [
        row
        for row in rows
        if wanted in row.address.lower() or wanted in label_text(row.labels).lower()
    ]
