"""An aligned comparison (a rerun's): a recording that opened mid-run, at engine step 812, and
its rerun, whose engine counts from 1, compared step for step from where each first scheduled."""

from __future__ import annotations

from stepview.insight.compare import compare_runs
from stepview.insight.compare_report import difference_line
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import (
    EngineState,
    RequestState,
    RequestView,
    StepSnapshot,
    Timings,
)

SPEC = SamplingSpec(temperature=0.0)


def run(first: int, tokens: list[dict[str, int]]) -> list[StepSnapshot]:
    """Snapshots from step ``first`` on, one per step: ``tokens`` scheduled per request."""
    return [
        StepSnapshot(
            step=first + i,
            clock=float(i),
            engine_state=EngineState.RUNNING,
            active=tuple(
                RequestView(rid, "p", SPEC, RequestState.DECODING, Timings(0.0), scheduled_tokens=n)
                for rid, n in step.items()
            ),
        )
        for i, step in enumerate(tokens)
    ]


STEPS = [{"r1": 8}, {"r1": 1, "r2": 8}, {"r1": 1, "r2": 1}, {"r2": 1}]


def test_steps_are_counted_from_where_each_run_first_scheduled() -> None:
    flight = run(812, STEPS)
    rerun = [StepSnapshot(step=0, clock=0.0, engine_state=EngineState.IDLE), *run(1, STEPS)]
    assert compare_runs(flight, rerun).divergence.step == 1  # unaligned: A "did nothing"
    comparison = compare_runs(flight, rerun, aligned=True)
    assert comparison.b_shift == 811 and comparison.divergence.step is None


def test_a_difference_is_named_in_the_recordings_steps_and_the_reruns_own() -> None:
    changed = [*STEPS[:2], {"r1": 1}, {"r1": 1, "r2": 1}]  # r2 waits a step in the rerun
    comparison = compare_runs(run(812, STEPS), run(1, changed), aligned=True)
    assert comparison.divergence.step == 814
    line = difference_line(comparison.divergence, comparison.b_names, comparison.b_shift)
    assert line.startswith("first scheduling difference: step 814 (B's step 3) — ")


def test_runs_that_start_alike_are_compared_as_they_are() -> None:
    comparison = compare_runs(run(1, STEPS), run(1, STEPS), aligned=True)
    assert comparison.b_shift == 0 and comparison.divergence.step is None
