"""vLLM's ``RequestStatus`` as the plug-in reads it, looked up from the table once: :data:`VLLM`.

The table of vLLM's request states (:mod:`stepview.engine.records.request_states`) names them;
this turns it into the lookups the capture and the waiting scan make on every step, against
the running vLLM's own enum, at import time: a dict get and a frozenset test per request, no
more than the comparisons they replace. A status of the running vLLM the table does not know
(a newer release) gets :attr:`~stepview.engine.records.request_states.CoreState.OTHER` and
its name, and is treated as blocked: named in every record while it lasts (nothing we see
tells when it changes) and skipped by the scan (every waiting status vLLM has added so far was
a blocked one). Apart from the capture so that a test can hand it another enum (a status faked
through the real capture path).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from vllm.v1.request import RequestStatus

from stepview.engine.records.request_states import BY_NAME, CoreState, Standing


class StatusLookups(NamedTuple):
    """One vLLM's request statuses, read by the table."""

    last_unfinished: Any  # vLLM's PREEMPTED: every status after it is finished (is_finished)
    code_of: Mapping[Any, int]  # the wire code of every unfinished status
    set_aside: frozenset[Any]  # blocked, or not known: named in every record, skipped by scans
    unknown: Mapping[Any, str]  # the names of the unfinished ones the table does not know


def lookups(statuses: Any) -> StatusLookups:
    """The lookups for ``statuses`` (a vLLM's ``RequestStatus`` enum)."""
    last = statuses.PREEMPTED
    unfinished = [status for status in statuses if status <= last]
    known = {status: BY_NAME.get(status.name) for status in unfinished}
    return StatusLookups(
        last,
        {s: int(CoreState.OTHER if row is None else row.code) for s, row in known.items()},
        frozenset(s for s, row in known.items() if row is None or row.standing is Standing.BLOCKED),
        {status: status.name for status, row in known.items() if row is None},
    )


VLLM = lookups(RequestStatus)
"""The running vLLM's (the capture and the waiting scan read this name on every step)."""
