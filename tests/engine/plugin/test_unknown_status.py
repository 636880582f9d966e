"""A request status vLLM adds that stepview's table does not know is said, never dropped.

A vLLM of fiction, one status newer than the table (``WAITING_FOR_KV_OFFLOAD``, inserted
before RUNNING as vLLM inserts its waiting statuses, so every later value shifts), is handed
to the plug-in's status lookups; the real capture path builds the records from a fake
scheduler holding such a request, they go over the wire, and the records' reader gives the
request its reason: "not known to this stepview: WAITING_FOR_KV_OFFLOAD".
"""

from __future__ import annotations

import enum
from typing import Any

import pytest

from stepview.engine.plugin import statuses
from stepview.engine.records.entries import EntryReader
from stepview.engine.records.facts import decode_facts, encode_facts
from stepview.engine.records.request_states import STATUSES, CoreState
from stepview.model.scheduling import KV_CACHE, UNKNOWN, WaitReason
from stepview.model.snapshot import RequestState
from tests.engine.plugin.fake_scheduler import FakeRequest, FakeScheduler, _captured, _output

pytestmark = pytest.mark.engine  # the plug-in's lookups import vLLM's RequestStatus

NEW = "WAITING_FOR_KV_OFFLOAD"


def newer_vllm_statuses() -> Any:
    """vLLM's RequestStatus with one more waiting status, before RUNNING."""
    from vllm.v1.request import RequestStatus

    names = [status.name for status in RequestStatus]
    names.insert(names.index("RUNNING"), NEW)
    return enum.IntEnum("RequestStatus", names)


def test_a_status_the_table_does_not_know_is_said_through_the_real_capture(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    newer = newer_vllm_statuses()
    assert NEW not in {row.name for row in STATUSES}  # the table really does not know it
    monkeypatch.setattr(statuses, "VLLM", statuses.lookups(newer))
    requests = {
        "run-1": FakeRequest(newer.RUNNING, 10, 11, num_output_tokens=1),
        "new-1": FakeRequest(newer[NEW], 20),
        "after-1": FakeRequest(newer.WAITING, 30),
    }
    scheduler = FakeScheduler(requests, order=["new-1", "after-1"], counts=(1, 2))
    capture, sink = _captured(scheduler, {"run-1": 1})
    record = decode_facts(encode_facts(sink.records[-1]))  # as a watch gets it
    by_id = {r.req_id: r for r in record.requests}
    # Named, as OTHER with vLLM's name for it; the running one keeps its own code though
    # every value after the new status moved.
    assert (by_id["new-1"].state, by_id["new-1"].unknown_status) == (CoreState.OTHER, NEW)
    assert (by_id["run-1"].state, by_id["run-1"].unknown_status) == (CoreState.RUNNING, "")
    assert record.waiting_head == "after-1"  # passed over by the scan, like a blocked one

    view = EntryReader(lambda core_id: core_id.rsplit("-", 1)[0])
    got = view.read(record)
    said = WaitReason(UNKNOWN, f"not known to this stepview: {NEW}")
    assert (got["new"].state, got["new"].wait_reason) == (RequestState.WAITING, said)
    # The scan stopped at the next one (for the KV cache, by vLLM's accounting): anyone
    # after it would wait behind it, not behind the request in the unknown status.
    assert got["after"].wait_reason is not None and got["after"].wait_reason.code == KV_CACHE
    assert view.queue_reason is not None and view.queue_reason.blocker == "after"

    # Nothing we see tells when such a status changes: it is named in every record.
    capture.after_schedule(scheduler, _output({"run-1": 1}))
    assert "new-1" in {r.req_id for r in sink.records[-1].requests}
    assert capture.failure is None


def test_the_running_vllm_has_no_status_the_table_does_not_know() -> None:
    """The installed vLLM's statuses are all the table's (the conformance suite checks each
    release, with vLLM's own rule of which are blocked)."""
    assert dict(statuses.VLLM.unknown) == {}
    assert int(CoreState.OTHER) not in statuses.VLLM.code_of.values()
