"""``--compare``: two recorded runs of the fake engine differing only in ``max_num_seqs``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepview.engine.driver.loop import Driver
from stepview.insight.compare import compare_runs, match_requests
from stepview.insight.compare_report import format_comparison
from stepview.model.commands import Pause, Resume
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState, RequestView, Timings
from stepview.testing.fake_engine import FakeEngine
from stepview.trace.reader import load_trace
from tests.trace.runs import add, record, run_to_end

COUNT = 6


def _load(driver: Driver, prefix: str = "r") -> None:
    """Six requests arriving together (paused, so both runs start from the same queue)."""
    driver.send(Pause())
    for i in range(COUNT):
        add(driver, f"{prefix}{i}", "y" * (20 + 4 * i), max_tokens=8 + i, temperature=0.0)
    driver.send(Resume())
    run_to_end(driver, COUNT)


def record_pair(
    tmp_path: Path, seqs_a: int = 4, seqs_b: int = 2, prefix_b: str = "r"
) -> tuple[Path, Path]:
    """Two traces of the same load, with ``max_num_seqs`` ``seqs_a`` and ``seqs_b``."""
    paths = []
    for name, seqs, prefix in (("a", seqs_a, "r"), ("b", seqs_b, prefix_b)):
        directory = tmp_path / name
        directory.mkdir()
        _, trace, _ = record(
            directory, lambda d, p=prefix: _load(d, p), FakeEngine(max_num_seqs=seqs)
        )
        paths.append(trace)
    return paths[0], paths[1]


def _first_difference_from_the_files(a: Path, b: Path) -> int | None:
    """The first step whose running requests (id, tokens, state) differ, read from the raw
    lines: an independent check of what :func:`compare_runs` works out."""

    def per_step(path: Path) -> dict[int, frozenset[tuple[str, int, str]]]:
        views: dict[str, dict[str, object]] = {}
        out: dict[int, frozenset[tuple[str, int, str]]] = {}
        for raw in path.read_text().splitlines()[1:]:
            line = json.loads(raw)
            if line["k"] != "step":
                continue
            for key in ("new", "upd"):
                for delta in line.get(key, ()):
                    views.setdefault(delta["id"], {}).update(delta)
            for delta in line.get("fin", ()):
                views.pop(delta["id"], None)
            for rid in line.get("gone", ()):
                views.pop(rid, None)
            out[line["step"]] = frozenset(
                (rid, int(v.get("st", 0)), str(v["s"]))  # type: ignore[call-overload]
                for rid, v in views.items()
                if v.get("s") in ("prefilling", "decoding")
            )
        return out

    sa, sb = per_step(a), per_step(b)
    for step in sorted(set(sa) | set(sb)):
        if sa.get(step, frozenset()) != sb.get(step, frozenset()):
            return step
    return None


def test_the_first_scheduling_difference_is_the_step_the_files_first_differ(
    tmp_path: Path,
) -> None:
    a, b = record_pair(tmp_path)
    comparison = compare_runs(load_trace(a).snapshots, load_trace(b).snapshots)
    expected = _first_difference_from_the_files(a, b)
    assert expected is not None
    assert comparison.divergence.step == expected
    scheduled_a = {rid for rid, _, s in comparison.divergence.a if s != "preempted"}
    scheduled_b = {rid for rid, _, s in comparison.divergence.b if s != "preempted"}
    assert len(scheduled_a) > len(scheduled_b)  # four seats against two
    assert comparison.matching.by_id == COUNT
    assert comparison.a.requests == comparison.b.requests == COUNT
    text = format_comparison(comparison, str(a), str(b))
    assert f"first scheduling difference: step {expected} — A schedules" in text
    assert "requests matched: 6 (6 by id, 0 by prompt" in text
    assert "output tok/s (busy)" in text and "e2e p99 (s)" in text and "preemptions" in text


def test_the_same_run_twice_has_no_difference(tmp_path: Path) -> None:
    a, b = record_pair(tmp_path, 4, 4, prefix_b="q")  # other ids: matched by prompt
    comparison = compare_runs(load_trace(a).snapshots, load_trace(b).snapshots)
    assert comparison.matching.by_prompt == COUNT
    assert comparison.divergence.step is None
    text = format_comparison(comparison, "a", "b")
    assert f"no scheduling difference over {comparison.divergence.steps} steps" in text


def _req(rid: str, prompt: str, arrival: float, **spec: object) -> RequestView:
    return RequestView(
        rid,
        prompt,
        SamplingSpec(**spec),
        RequestState.FINISHED,
        Timings(arrival),  # type: ignore[arg-type]
    )


def test_matching_by_id_then_by_prompt_and_parameters_in_arrival_order() -> None:
    a = [_req("r1", "hi", 0), _req("r2", "hi", 1), _req("r3", "yo", 2, temperature=0.5)]
    b = [_req("r1", "other", 0), _req("x2", "hi", 2), _req("x1", "hi", 1), _req("x3", "yo", 3)]
    matching = match_requests(a, b)
    assert matching.b_to_a == {"r1": "r1", "x1": "r2"}
    assert (matching.by_id, matching.by_prompt, matching.only_a, matching.only_b) == (1, 1, 1, 2)


@pytest.mark.parametrize("seqs", [(4, 2)])
def test_request_deltas_list_the_biggest_changes(tmp_path: Path, seqs: tuple[int, int]) -> None:
    a, b = record_pair(tmp_path, *seqs)
    comparison = compare_runs(load_trace(a).snapshots, load_trace(b).snapshots)
    assert len(comparison.deltas) == COUNT
    changes = [abs(d.e2e_change) for d in comparison.deltas]
    assert changes == sorted(changes, reverse=True) and changes[0] > 0
