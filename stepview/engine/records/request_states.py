"""vLLM's request states in one table (:data:`STATUSES`), and their wire codes (:class:`CoreState`).

Each row is one of vLLM's unfinished ``RequestStatus`` members, by name (as every supported
release has it: 0.32 to 0.34 list the same six), with the code the records carry for it on
the wire (a :class:`CoreState`, defined here beside the table: a state vLLM adds is this
file's change, its code and its row), whether a request in it waits, is blocked or runs
(:class:`Standing`), the state stepview shows (:class:`RequestState`), and, for a blocked
one, the wait reason its status gives it (a code of :data:`stepview.model.scheduling.REASONS`)
and the words that say what it waits for, and the first release with it.

Everything that knows vLLM's states derives from it, looked up once at import time: the
plug-in inside vLLM's engine core (:mod:`stepview.engine.plugin.statuses`: which wire code a
status gets, which requests are named in every record and skipped by the waiting scan), the
records' reader (:mod:`~stepview.engine.records.entries`: stepview's state) and the
waiting-reason rules (:mod:`~stepview.engine.records.waiting_reasons`: a blocked request's
reason); the conformance suite checks it against each release's own enum and its own rule of
which statuses are blocked (``Scheduler._is_blocked_waiting_status``).

A status the table does not know (a vLLM newer than this stepview) is *said*, never dropped:
the plug-in sends it as :attr:`CoreState.OTHER` with its name
(:attr:`~stepview.engine.records.facts.RequestFacts.unknown_status`), it is named in every
record and skipped by the waiting scan like a blocked one (every waiting status vLLM has added
so far was a blocked one), and its request's reason is "not known to this stepview: NAME"
(:func:`~stepview.model.scheduling.unknown_status`). A code this side does not know (a newer
plug-in's) reads the same way.

Plain data, no vLLM import: the plug-in reads it inside the engine core, a watch on a laptop.
"""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import Final, NamedTuple

from stepview.engine.records.vllm_versions import TESTED_RELEASES
from stepview.model.scheduling import DEFERRED, WaitReason, unknown_status
from stepview.model.snapshot import RequestState


class CoreState(enum.IntEnum):
    """A request's status in the engine core's scheduler, as the records carry it (an int in
    :attr:`~stepview.engine.records.facts.RequestFacts.state`).

    The scheduler has one RUNNING status for prefill and decode alike: a RUNNING request is
    still prefilling while ``num_computed_tokens < num_prompt_tokens``. The WAITING_FOR_*
    members are vLLM's blocked waiting statuses, kept apart for the waiting-reason view. The
    codes are the wire's, in the order they were added, not vLLM's (:data:`STATUSES` has
    vLLM's): never renumbered, a state vLLM adds gets the next value, after the last one.
    """

    WAITING = 0
    WAITING_FOR_GRAMMAR = 1
    WAITING_FOR_REMOTE_KVS = 2
    WAITING_FOR_STREAMING_REQ = 3
    RUNNING = 4
    PREEMPTED = 5
    OTHER = 6  # a status this stepview does not know (a newer vLLM)
    # A state a newer vLLM adds: here, with the next value (and its row in STATUSES).


class Standing(enum.Enum):
    """Where a request in a status stands in vLLM's scheduler."""

    WAITING = "waiting"  # in a waiting queue, scanned by schedule() in its turn
    BLOCKED = "blocked"  # waiting, set aside (deferred_waiting) until what it waits for comes
    RUNNING = "running"  # scheduled (prefill or decode)


class Status(NamedTuple):
    """One of vLLM's unfinished request statuses, and everything stepview says of it."""

    name: str  # the RequestStatus member's name in vLLM
    code: CoreState  # on the wire (never renumbered: a new one is appended to CoreState)
    standing: Standing
    state: RequestState  # stepview's (RUNNING: prefilling until its prompt is computed)
    words: str  # what a request in it is doing, for a person
    reason: str | None = None  # a blocked one's wait reason (a code of model.scheduling)
    since: tuple[int, int] = TESTED_RELEASES[0]  # the first vLLM release with it


STATUSES: Final = (
    Status("WAITING", CoreState.WAITING, Standing.WAITING, RequestState.WAITING, "waiting"),
    Status(
        "WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR",
        CoreState.WAITING_FOR_GRAMMAR,
        Standing.BLOCKED,
        RequestState.WAITING,
        "waiting for its structured-output grammar to compile",
        DEFERRED,
    ),
    Status(
        "WAITING_FOR_REMOTE_KVS",
        CoreState.WAITING_FOR_REMOTE_KVS,
        Standing.BLOCKED,
        RequestState.WAITING,
        "waiting for its KV cache to arrive (KV transfer)",
        DEFERRED,
    ),
    Status(
        "WAITING_FOR_STREAMING_REQ",
        CoreState.WAITING_FOR_STREAMING_REQ,
        Standing.BLOCKED,
        RequestState.WAITING,
        "waiting for more streamed input",
        DEFERRED,
    ),
    Status("RUNNING", CoreState.RUNNING, Standing.RUNNING, RequestState.PREFILLING, "running"),
    Status(
        "PREEMPTED",
        CoreState.PREEMPTED,
        Standing.WAITING,
        RequestState.PREEMPTED,
        "preempted: its KV cache freed, back at the front of the waiting queue",
    ),
)
"""vLLM's unfinished request statuses, in vLLM's order (everything after PREEMPTED is a
finished status in vLLM, which no record names)."""

BY_NAME: Final = MappingProxyType({status.name: status for status in STATUSES})
BY_CODE: Final = MappingProxyType({int(status.code): status for status in STATUSES})

RUNNING: Final = next(int(s.code) for s in STATUSES if s.standing is Standing.RUNNING)
"""The one running code (a RUNNING request prefills, then decodes: its progress tells)."""
SCANNED: Final = frozenset(int(s.code) for s in STATUSES if s.standing is not Standing.BLOCKED)
"""The codes of requests vLLM's scan takes in their turn: any other code is blocked, or not
known to this stepview (named in every record, a reason of its own)."""
WAITING_STATE: Final = MappingProxyType(
    {int(s.code): s.state for s in STATUSES if s.standing is not Standing.RUNNING}
)
"""stepview's state of a request that does not run, by code (an unknown code: waiting)."""
BLOCKED_REASONS: Final = MappingProxyType(
    {
        int(s.code): WaitReason(s.reason or DEFERRED, s.words)
        for s in STATUSES
        if s.standing is Standing.BLOCKED
    }
)
"""A blocked request's reason, by code: one object each, built once."""


def blocked_reason(code: int, name: str) -> WaitReason:
    """The reason of a request whose code is not one vLLM's scan takes: its blocked status's,
    or, for a status (``name``) or code this stepview does not know, one that says so."""
    reason = BLOCKED_REASONS.get(code)
    if reason is not None:
        return reason
    return unknown_status(name or f"state {code}")
