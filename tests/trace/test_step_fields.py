"""Every field of a snapshot goes into the trace and comes back: a new field cannot be dropped.

The first test fails when a field is added to :class:`StepSnapshot` and not to the trace's
table; the second when it is in the table but does not survive a recording (its snapshot sets
every field, nested ones too, to something else than its default, and says which it missed).
"""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from stepview.engine.driver.loop import Driver
from stepview.model.alerts import STALL, THRASH, Alert
from stepview.model.commands import AddRequest, Arrival, Schedule
from stepview.model.grow import Frozen
from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import MAX_NUM_SEQS, StepBudget, WaitReason
from stepview.model.server_window import Latency, ServerWindow
from stepview.model.snapshot import (
    ArrivalCount,
    Completion,
    EngineCounters,
    EngineInfo,
    EngineState,
    RankStatus,
    RecentStep,
    RequestState,
    RequestView,
    StepSnapshot,
    Timings,
)
from stepview.trace.reader import load_trace
from stepview.trace.step_fields import DELTA_FIELDS, STEP_FIELDS, start_snapshot
from tests.helpers import DATA
from tests.trace.compare import assert_same_run
from tests.trace.runs import record, run_to_end, write_trace

# The keys a step line uses for its deltas (see stepview.trace.format).
_DELTA_KEYS = {"k", "recent", "recent_cap", "recent_reset", "new", "upd", "fin", "gone", "order"}
_ALWAYS_KEYS = {"k", "step", "clock", "state", "step_time"}


def test_every_field_of_a_snapshot_is_in_the_table_once() -> None:
    names = [f.name for f in STEP_FIELDS] + list(DELTA_FIELDS)
    assert sorted(names) == sorted(f.name for f in fields(StepSnapshot)), (
        "a StepSnapshot field is missing from stepview.trace.step_fields.STEP_FIELDS "
        "(or the table names one the snapshot does not have)"
    )
    keys = [f.key for f in STEP_FIELDS]
    assert len(set(keys)) == len(keys) and not set(keys) & _DELTA_KEYS
    assert {f.key for f in STEP_FIELDS if f.always} | {"k"} == _ALWAYS_KEYS


def _not_default(value: object, default: object, where: str) -> list[str]:
    """The (nested) fields of ``value`` still equal to ``default``'s."""
    if is_dataclass(value) and not isinstance(value, type) and default is not None:
        return [
            name
            for f in fields(value)
            for name in _not_default(
                getattr(value, f.name), getattr(default, f.name), f"{where}.{f.name}"
            )
        ]
    return [where] if value == default else []


def _request(request_id: str, state: RequestState, text: str) -> RequestView:
    return RequestView(
        request_id,
        "a prompt",
        SamplingSpec(max_tokens=5),
        state,
        Timings(0.5, 0.75, 1.0, 2.0 if state.done else None),
        prompt_tokens=3,
        computed_prompt_tokens=3,
        completions=(Completion.of_text(0, text, token_ids=Frozen([7, 8])),),
        trace_context="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )


def _full() -> StepSnapshot:
    """A snapshot whose every field, and every field of its engine info and counters, is set."""
    return StepSnapshot(
        step=7,
        clock=3.5,
        engine_state=EngineState.RUNNING,
        info=EngineInfo("m", True, "0.9", 128, 4, 5, False, "tcp://gpu-box:5570", True, 16),
        phase="warming up",
        phase_since=1.25,
        step_time=0.02,
        counters=EngineCounters(2, 1, 0.375, 16, 2, 40, 24, 1),
        active=(_request("run", RequestState.DECODING, "ab"),),
        finished=Frozen([_request("done", RequestState.FINISHED, "xyz")]),
        recent=(RecentStep(7, 3.5, 0.02, 2, 1, 0.375, 2),),
        total_generated=12,
        ranks=(RankStatus(0, True, 2, 1, 0.25), RankStatus(1, False, 0, 3, 0.5)),
        budget=StepBudget(64, 16, 2, 10, 24),
        alerts=(Alert(THRASH, 6, 3.0, "run preempted 3 times", "run"), Alert(STALL, 7, 3.5, "x")),
        arrivals=ArrivalCount(12, 40),
        queue_reasons=(WaitReason(MAX_NUM_SEQS, "all 4 running slots taken", None), None),
        server=ServerWindow(
            "http://gpu-box:8000",
            60.0,
            12.0,
            (Latency("ttft", 0.01, 0.02, 0.03, 4), Latency("e2e")),
            (("capacity", 2),),
            (("length", 3),),
            9,
            1,
            0.5,
            20.0,
            "restart it so",
        ),
    )


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()[1:] if '"k":"step"' in x]


def test_a_snapshot_with_every_field_set_replays_equal(tmp_path: Path) -> None:
    empty = start_snapshot(EngineInfo())
    full = _full()
    assert not _not_default(full, empty, "snapshot"), "set these in _full() too"
    # Back to the defaults (``finished`` only grows), then a step that changed nothing else.
    back = StepSnapshot(
        step=8, clock=4.0, engine_state=EngineState.IDLE, info=full.info, finished=full.finished
    )
    same = StepSnapshot(
        step=9, clock=4.5, engine_state=EngineState.IDLE, info=full.info, finished=full.finished
    )
    live = [empty, full, back, same]
    path = tmp_path / "full.trace.jsonl"
    write_trace(path, live)
    trace = load_trace(path)
    assert trace.warning is None
    replayed = list(trace.snapshots)
    for before, after in zip(live, replayed, strict=True):
        for f in fields(StepSnapshot):
            assert getattr(after, f.name) == getattr(before, f.name), (before.step, f.name)
    lines = _lines(path)
    assert {"ranks", "arrivals", "alerts", "budget", "info"} <= set(lines[1])
    assert {"ranks", "arrivals", "alerts", "budget"} <= set(lines[2])  # changed back
    assert set(lines[3]) == _ALWAYS_KEYS  # only what changed


def test_unchanged_ranks_and_arrivals_cost_nothing(tmp_path: Path) -> None:
    """A data-parallel watch or a synthetic load writes them when they change, not per step."""
    ranks = (RankStatus(0, True, 1, 0, 0.125), RankStatus(1, True, 2, 0, 0.25))
    live = [
        StepSnapshot(
            step=i,
            clock=float(i),
            engine_state=EngineState.RUNNING,
            ranks=ranks,
            arrivals=ArrivalCount(min(i, 3), 3),
        )
        for i in range(1, 7)
    ]
    path = tmp_path / "ranks.trace.jsonl"
    write_trace(path, live)
    lines = _lines(path)
    assert [("ranks" in line, line.get("arrivals")) for line in lines] == [
        (True, [1, 3]),
        (False, [2, 3]),
        (False, [3, 3]),
        (False, None),
        (False, None),
        (False, None),
    ]
    assert [(s.ranks, s.arrivals) for s in load_trace(path).snapshots] == [
        (s.ranks, s.arrivals) for s in live
    ]


def test_traces_recorded_before_ranks_and_arrivals_replay_without_them() -> None:
    for name in ("replay.trace.jsonl", "compare_a.trace.jsonl"):  # versions 1 and 2
        snapshots = load_trace(DATA / name).snapshots
        assert len(snapshots) > 10
        assert all(s.ranks == () and s.arrivals == ArrivalCount() for s in snapshots)


def test_a_recorded_synthetic_load_replays_its_arrivals(tmp_path: Path) -> None:
    """The status bar's "load 3/4 arrived" of a replay is the live run's, step by step."""
    arrivals = tuple(
        Arrival(0.004 * i, AddRequest(f"r{i}", "hi", SamplingSpec(max_tokens=2))) for i in range(4)
    )

    def script(driver: Driver) -> None:
        driver.send(Schedule(arrivals))
        run_to_end(driver, 4)

    driver, trace_path, _ = record(tmp_path, script)
    live = driver.history()
    assert {s.arrivals for s in live} >= {ArrivalCount(1, 4), ArrivalCount(4, 4)}
    assert_same_run(live, load_trace(trace_path).snapshots)  # arrivals and ranks included
