"""The records a watch received and has not read yet, and how a backlog is kept bounded.

Records wait here while the view is held (paused, or waiting for a request's text from the
server's API) or behind. Past :data:`MAX_BACKLOG` the oldest are read as one with the next
of the same engine core (:func:`~stepview.engine.records.entries.merge_records`): nothing
is lost but the steps in between. A server steps 100-200 times a second: this is a view at
most a second or two behind. Kept longer, a stepview that cannot keep up (niced on a box the
server saturates) would leave the records in zmq's queues instead, whose overflow drops them
whole, with the ends of requests in them.
"""

from __future__ import annotations

from collections import deque

from stepview.engine.records.entries import merge_records
from stepview.engine.records.facts import StepFacts
from stepview.engine.watch.detokenize import Wait, joined_waits
from stepview.engine.watch.watched_core import WatchedCore

MAX_BACKLOG = 256

Backlog = deque[tuple[WatchedCore, StepFacts, Wait | None]]
"""Records not read yet, oldest first: each one's engine core, and what its reading waits for
(see :mod:`~stepview.engine.watch.detokenize`)."""


def fold_oldest(backlog: Backlog, excess: int) -> int:
    """Fold the oldest records into the next record of the same engine core, ``excess`` of
    them at most; how many were folded (fewer when a core's last record is the oldest)."""
    folded = 0
    while folded < excess:
        core, facts, wait = backlog.popleft()
        for i, (other, later, later_wait) in enumerate(backlog):
            if other is core:
                joined = merge_records(facts, later)
                backlog[i] = (core, joined, joined_waits(wait, later_wait))
                folded += 1
                break
        else:  # the core's last record: it stays
            backlog.appendleft((core, facts, wait))
            break
    return folded
