"""Trace version 2 carries what the scheduler decided; version 1 traces still replay."""

from __future__ import annotations

import json
from pathlib import Path

from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import BEHIND, KV_CACHE, StepBudget, WaitReason
from stepview.model.snapshot import (
    EngineState,
    RequestState,
    RequestView,
    StepSnapshot,
    Timings,
)
from stepview.trace.format import TRACE_VERSION
from stepview.trace.reader import load_trace
from tests.helpers import DATA
from tests.trace.runs import write_trace

REPLAY_V1 = DATA / "replay.trace.jsonl"


def _view(request_id: str, **fields: object) -> RequestView:
    return RequestView(
        request_id, "hi", SamplingSpec(), RequestState.WAITING, Timings(0.0), **fields
    )  # type: ignore[arg-type]


def test_wait_reasons_kv_blocks_and_budget_round_trip(tmp_path: Path) -> None:
    kv = WaitReason(KV_CACHE, "needs 3 more KV blocks, 1 free")
    first = StepSnapshot(
        step=1,
        clock=1.0,
        engine_state=EngineState.RUNNING,
        active=(
            _view("a", wait_reason=kv, kv_blocks=0),
            _view("b", wait_reason=WaitReason(BEHIND, "behind a", "a")),
        ),
        budget=StepBudget(256, 200, 56, 1, 40),
    )
    a2 = first.active[0]._replace(
        state=RequestState.PREFILLING,
        wait_reason=None,
        scheduled_tokens=48,
        kv_blocks=3,
        peak_kv_blocks=3,
        cached_prompt_tokens=16,
    )
    second = StepSnapshot(
        step=2,
        clock=2.0,
        engine_state=EngineState.RUNNING,
        active=(a2, first.active[1]),
        budget=StepBudget(256, 48, 0, 0, 40),
    )
    third = StepSnapshot(step=3, clock=3.0, engine_state=EngineState.RUNNING, active=(a2,))
    path = tmp_path / "v2.trace.jsonl"
    write_trace(path, [first, second, third])
    assert json.loads(path.read_text().splitlines()[0])["version"] == TRACE_VERSION

    snapshots = load_trace(path).snapshots
    assert [s.budget for s in snapshots] == [first.budget, second.budget, None]
    assert snapshots[0].active == first.active
    assert snapshots[1].active == second.active
    assert snapshots[1].active[0].cached_prompt_tokens == 16
    assert snapshots[0].active[1].wait_reason == WaitReason(BEHIND, "behind a", "a")


def test_a_version_1_trace_replays_without_the_new_fields() -> None:
    trace = load_trace(REPLAY_V1)
    assert json.loads(REPLAY_V1.read_text().splitlines()[0])["version"] == 1
    assert trace.warning is None
    snapshots = trace.snapshots
    assert len(snapshots) > 10
    views = [v for s in snapshots for v in s.active]
    assert views and all(v.wait_reason is None and v.kv_blocks == 0 for v in views)
    assert all(s.budget is None for s in snapshots)


def test_results_records_carry_the_kv_peak_and_the_prefix_cache_hit() -> None:
    from stepview.files.records import request_record

    record = request_record(_view("a", kv_blocks=2, peak_kv_blocks=5, cached_prompt_tokens=32))
    assert (record["kv_peak_blocks"], record["cached_prompt_tokens"]) == (5, 32)
