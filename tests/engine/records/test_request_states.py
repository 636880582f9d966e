"""The table of vLLM's request states and the wire codes beside it (records/request_states.py).

A state vLLM adds is one file's change, its code and its row; these hold the two together and
the wire as it was: a code once sent is never renumbered (an older reader would take one state
for another), so new codes only ever come after the last.
"""

from __future__ import annotations

from stepview.engine.records.request_states import BY_CODE, STATUSES, CoreState
from stepview.engine.records.vllm_versions import TESTED_RELEASES

# The codes records have carried since the states were sent as ints: never to change.
SENT = {
    "WAITING": 0,
    "WAITING_FOR_GRAMMAR": 1,
    "WAITING_FOR_REMOTE_KVS": 2,
    "WAITING_FOR_STREAMING_REQ": 3,
    "RUNNING": 4,
    "PREEMPTED": 5,
    "OTHER": 6,
}


def test_codes_once_sent_keep_their_values_and_new_ones_come_after() -> None:
    assert {name: int(CoreState[name]) for name in SENT} == SENT
    assert [int(code) for code in CoreState] == list(range(len(CoreState)))  # in order, no gap


def test_every_code_but_other_has_exactly_one_row_and_every_row_a_code_of_its_own() -> None:
    codes = [row.code for row in STATUSES]
    assert len(set(codes)) == len(codes)
    assert set(codes) == set(CoreState) - {CoreState.OTHER}
    assert set(BY_CODE) == {int(code) for code in codes}


def test_every_row_is_of_a_tested_release() -> None:
    """A row for a release newer than every tested one would be checked by no conformance run."""
    assert all(TESTED_RELEASES[0] <= row.since <= TESTED_RELEASES[-1] for row in STATUSES)
