"""The records a watch received and has not read yet, and how a backlog is kept bounded.

Records wait here while the view is held (paused, or waiting for a request's text from the
server's API) or behind. Past :data:`MAX_BACKLOG` the oldest are read as one with the next
of the same engine core (:func:`~stepview.engine.records.entries.merge_many`): nothing
is lost but the steps in between. A server steps 100-200 times a second: this is a view at
most a second or two behind. Kept longer, a stepview that cannot keep up (niced on a box the
server saturates) would leave the records in zmq's queues instead, whose overflow drops them
whole, with the ends of requests in them.

A fleet's watch reads its backlog at a pace (:class:`ReadPace`): what came since the last read
as one record per engine core. The fleet screen shows each server's figures, not its steps,
and 64 servers stepping 20 times a second are 1 280 records a second for one process: read one
by one they kept a core busy and starved the screen itself.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from stepview.engine.records.entries import merge_many
from stepview.engine.records.facts import StepFacts
from stepview.engine.watch.link.descriptions import Wait, joined_waits
from stepview.engine.watch.link.watched_core import WatchedCore

MAX_BACKLOG = 256
FLEET_READ_S = 0.25  # a fleet's watch reads what came at most this often (the screen: 0.5 s)
FLEET_READS_PER_S = 250.0
"""The reads a second a fleet makes of its plug-in servers in all, past :data:`FLEET_READ_S`
each: each server's turn costs a snapshot whatever came, and at a thousand servers four a
second were more than a core (:func:`fleet_read_every`)."""
FLEET_READ_MAX_S = 1.0
"""The seldomest a fleet reads a plug-in server, whatever its size: a row a second behind."""


def fleet_read_every(servers: int) -> float:
    """How often a fleet of ``servers`` plug-in servers reads each: every
    :data:`FLEET_READ_S` up to ~60 of them, then seldomer (:data:`FLEET_READS_PER_S` reads
    in all), up to :data:`FLEET_READ_MAX_S` (a fleet of 250 and more)."""
    return min(FLEET_READ_MAX_S, max(FLEET_READ_S, servers / FLEET_READS_PER_S))


@dataclass
class ReadPace:
    """How often a watch reads its records: ``every`` seconds at most, what came meanwhile as
    one record per engine core; 0 reads each record as a step of its own.

    Shared by the fleet (which sets it: 0 while a server's full view is open, for its steps)
    and the watch's driver thread (which reads it each time it looks for a record): one float,
    replaced whole. ``scheduled``: the watch is called at its pace by a pool (a large fleet's,
    :mod:`~stepview.engine.watch.fleet.fleet_pool`), so it never waits for the pace itself.
    """

    every: float = FLEET_READ_S
    scheduled: bool = False


class FleetPaces:
    """A fleet's read paces: each plug-in server's (:meth:`of`: made at its first ask; 0 while
    its full view is open), and the fleet's own, which its size sets (:func:`fleet_read_every`:
    none of them is read more often while reading at a pace). Asked from one thread at a time
    (the launcher's, then the one that follows the fleet's listings)."""

    def __init__(self) -> None:
        self.each: dict[str, ReadPace] = {}
        self.fleet = ReadPace(scheduled=True)

    def of(self, address: str) -> ReadPace:
        pace = self.each.setdefault(address, ReadPace(scheduled=True))
        self.fleet.every = fleet_read_every(len(self.each))
        return pace


Held = tuple[StepFacts, Wait | None]  # a record not read yet, and what its reading waits for
Backlog = deque[tuple[WatchedCore, StepFacts, Wait | None]]
"""Records not read yet, oldest first: each one's engine core, and what its reading waits for
(see :mod:`~stepview.engine.watch.link.detokenize`)."""


def fold_oldest(backlog: Backlog, excess: int) -> int:
    """Fold the ``excess`` oldest records into the next record of their engine core (a core
    with no later record keeps one, the merge of its own); how many records were folded.

    One merge per run of a core's records (:func:`~stepview.engine.records.entries.merge_many`),
    linear in what the records name: the excess is thousands of records when a starved watch
    reads a burst. A full record that does not follow the one before it (records were lost in
    between, or the engine core restarted) starts a run of its own: merged across, the gap's
    own full record would be gone, and with it the point where the log of ends is asked to
    fill it (:mod:`~stepview.engine.watch.link.catching_up`).
    """
    taken: dict[WatchedCore, list[list[Held]]] = {}  # each core's runs, oldest first
    for _ in range(min(excess, len(backlog))):
        core, facts, wait = backlog.popleft()
        runs = taken.setdefault(core, [])
        if runs and _follows(runs[-1][-1][0], facts):
            runs[-1].append((facts, wait))
        else:
            runs.append([(facts, wait)])
    folded = 0
    joining = set(taken)  # cores whose last run may still join their next record
    for i, (core, later, later_wait) in enumerate(backlog):
        if not joining:
            break
        if core in joining:
            joining.discard(core)
            runs = taken[core]
            if _follows(runs[-1][-1][0], later):
                last = runs.pop()
                backlog[i] = (core, *_merged([*last, (later, later_wait)]))
                folded += len(last)
    kept = [(core, run) for core, runs in taken.items() for run in runs]
    for core, run in reversed(kept):  # the rest: one record per run, before what follows
        backlog.appendleft((core, *_merged(run)))
        folded += len(run) - 1
    return folded


def _follows(before: StepFacts, facts: StepFacts) -> bool:
    """Whether ``facts`` may be read as one with ``before`` (see :func:`fold_oldest`)."""
    if not facts.full:
        return True  # (the stream lets a record of change in only right after the one before)
    return facts.core_started == before.core_started and facts.seq == before.seq + 1


def _merged(records: list[Held]) -> tuple[StepFacts, Wait | None]:
    """Records of one core as one, waiting for what any of them waited for."""
    return merge_many([facts for facts, _ in records]), joined_waits(w for _, w in records)
