"""Requests a watch knows came and went but cannot show: counted and said, never dropped.

A request another client sent is shown from the record that first names it with its intro
(prompt ids, sampling). Two ways leave one in no pane and no results file: its whole life
was in records that were lost and past the plug-in's log of ends, or it left while its
intro was still awaited. Each such request is counted (``stepview_requests_unseen_total``,
the link's line) and the log says so at once, with what it knows of which ones.
"""

from __future__ import annotations

import logging
from collections.abc import Container, Iterable

log = logging.getLogger(__name__)


class UnseenRequests:
    """The requests of one engine core (publishing at ``address``) that went unseen."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.count = 0

    def past_the_log(self, core_ids: Iterable[str], held: Container[str], partly: bool) -> None:
        """Requests that arrived and ended within lost records (``core_ids``, those ``held``
        aside) that the plug-in's log of ends no longer held (``partly``: nor even all
        their ids)."""
        unseen = sum(1 for core_id in dict.fromkeys(core_ids) if core_id not in held)
        if partly:
            log.warning("stepview: the log of ends at %s no longer held all that was "
                        "missed: more requests than counted may have gone unseen",
                        self.address)  # fmt: skip
        if unseen:
            self.count += unseen
            what = "arrived and ended in records lost and past the plug-in's log of ends"
            log.warning("stepview: %d requests at %s %s: not shown, not in the results file "
                        "(%d so far)", unseen, self.address, what, self.count)  # fmt: skip

    def before_their_intro(self, core_ids: list[str]) -> None:
        """Other clients' requests that left while still waiting for their intro (never
        adopted; stepview's own are in its ledger from the start)."""
        if core_ids:
            self.count += len(core_ids)
            log.warning("stepview: %d requests at %s left before their intro (prompt, "
                        "sampling) was read: not shown, not in the results file (%s; %d so "
                        "far)", len(core_ids), self.address, ", ".join(core_ids),
                        self.count)  # fmt: skip
