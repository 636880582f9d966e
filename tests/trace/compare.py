"""Checks shared by the trace tests (fake engine here, real vLLM in tests/engine)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields

from stepview.files.records import request_record
from stepview.model.snapshot import StepSnapshot

# Every field but the requests, which are compared by their records below.
STEP_FIELDS = tuple(f.name for f in fields(StepSnapshot) if f.name not in ("active", "finished"))


def assert_same_run(live: Sequence[StepSnapshot], replayed: Sequence[StepSnapshot]) -> None:
    """Replay shows, snapshot by snapshot, what the live run showed, sharing the same objects.

    Every step-level field and the record of every request must be equal; and a request whose
    view object stayed the same between two live snapshots must stay the same object in the
    replay too (and change where it changed), so the UI's identity diff works on replays.
    """
    assert len(replayed) == len(live)
    previous: tuple[StepSnapshot, StepSnapshot] | None = None
    for index, (a, b) in enumerate(zip(live, replayed, strict=True)):
        for name in STEP_FIELDS:
            assert getattr(b, name) == getattr(a, name), (index, a.step, name)
        assert [request_record(v) for v in b.active] == [request_record(v) for v in a.active], (
            index,
            a.step,
        )
        assert [request_record(v) for v in b.finished] == [request_record(v) for v in a.finished], (
            index,
            a.step,
        )
        if previous is not None:
            live_before = {v.request_id: v for v in previous[0].active}
            replay_before = {v.request_id: v for v in previous[1].active}
            for view_a, view_b in zip(a.active, b.active, strict=True):
                old_a = live_before.get(view_a.request_id)
                old_b = replay_before.get(view_b.request_id)
                assert (old_a is view_a) == (old_b is view_b), (index, view_a.request_id)
        previous = (a, b)
