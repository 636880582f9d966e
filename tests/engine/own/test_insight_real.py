"""Insight on real vLLM: timelines and preemptions as they happened, latency as vLLM saw it.

A tiny KV cache makes vLLM preempt (see test_driver_real_scheduling.py). The timeline and
preemption records are checked against the snapshots of the same run, and every request's
latency figures against vLLM's own per-request stats (``FinishedRequestStats``, which vLLM's
stat loggers receive when a request finishes): stepview takes the scheduled and first-token
instants from vLLM (engine/own/vllm_times.py), so those agree exactly; only the arrival is
dated differently (when stepview accepted the request rather than when vLLM queued it).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from stepview.engine.own.vllm_stats import StatsSink
from stepview.model.latency import request_latency
from tests.engine.own.driver_checks import (  # noqa: F401  (_no_pool_engine: the fixture)
    _add,
    _final,
    _no_pool_engine,
    _running,
    _wait_done,
    check_run,
)
from tests.helpers import TINY_KV_BYTES

pytestmark = pytest.mark.engine

# What stepview's stamps may exceed vLLM's by, on top of a step's time: accepting a request
# and handing it to vLLM, building and publishing the snapshot (generous: a busy 2-core box).
SLACK_S = 0.05


@pytest.fixture
def vllm_finished(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """vLLM's FinishedRequestStats of every request that finishes, by request id."""
    seen: dict[str, Any] = {}
    record = StatsSink.record

    def keep(self: StatsSink, scheduler_stats: Any, iteration_stats: Any) -> None:
        for stats in getattr(iteration_stats, "finished_requests", None) or ():
            seen[str(stats.request_id)] = stats
        record(self, scheduler_stats, iteration_stats)

    monkeypatch.setattr(StatsSink, "record", keep)
    yield seen


def test_preemption_timeline_and_latency_against_vllm(vllm_finished: dict[str, Any]) -> None:
    ids = [f"q{i}" for i in range(4)]
    prompt = "def foo(x): return x + " * 20  # ~180 tokens: two of them fill the cache
    with _running(kv_cache_memory_bytes=TINY_KV_BYTES) as driver:
        for rid in ids:
            _add(driver, rid, prompt, temperature=0, max_tokens=160)
        final = _final(_wait_done(driver, ids))
        history = driver.history()
        insight = driver.insight
    check_run(history)
    step_time = {s.step: s.step_time for s in history}
    kv = {s.step: s.counters.kv_cache_usage for s in history}
    preempted = [rid for rid in ids if final[rid].num_preemptions]
    assert preempted, "no request was preempted"
    for rid in ids:
        view = final[rid]
        fields = insight.request_fields(rid)
        # Preemptions: one record per preemption vLLM counted, at the step the snapshots
        # showed it, with the progress the request had just before.
        assert len(fields["preemptions"]) == view.num_preemptions
        for record in fields["preemptions"]:
            step = record["step"]
            before = next(s.find(rid) for s in reversed(history) if s.step < step and s.find(rid))
            assert before is not None
            expected_lost = before.computed_prompt_tokens + max(0, before.output_tokens - 1)
            assert record["computed_tokens_lost"] == expected_lost > 0
            assert record["kv_usage_after"] == round(kv[step], 4)
        # Timeline: waiting first, a preempted segment per preemption, each followed by a
        # prefill of the whole prompt again; decode last; no gaps.
        timeline = fields["timeline"]
        states = [seg["state"] for seg in timeline]
        assert states[0] == "waiting" and states[-1] == "decode", states
        assert states.count("preempted") == view.num_preemptions
        assert states.count("prefill") == view.num_preemptions + 1
        for seg, after in itertools.pairwise(timeline):
            assert seg["end"] == after["start"]
            assert seg["first_step"] <= seg["last_step"] <= after["first_step"]
            if seg["state"] == "preempted":
                assert after["state"] == "prefill"
                assert after["tokens_prefilled"] == view.prompt_tokens
        assert timeline[-1]["end"] == round(view.timings.finished or 0.0, 6)
        # Latency against vLLM's own figures for the same request.
        theirs = vllm_finished[rid]
        ours = request_latency(view)
        assert theirs.num_generation_tokens == view.output_tokens == 160
        assert theirs.num_preemptions == view.num_preemptions
        t = view.timings
        assert t.scheduled is not None and t.first_token is not None
        assert ours.queue is not None and ours.ttft is not None and ours.e2e is not None
        # Scheduled and first token are vLLM's own instants (the SCHEDULED event, the first
        # token's outputs): the prefill is vLLM's to the microsecond, and queue time and TTFT
        # differ from vLLM's only by the moment each side dates the arrival from (stepview
        # when it accepted the request, vLLM when its core queued it).
        assert ours.queue < ours.ttft
        assert (t.first_token - t.scheduled) == pytest.approx(theirs.prefill_time, abs=1e-3)
        assert -SLACK_S <= ours.queue - theirs.queued_time <= SLACK_S
        vllm_ttft = theirs.queued_time + theirs.prefill_time
        assert -SLACK_S <= ours.ttft - vllm_ttft <= SLACK_S
        assert abs(ours.e2e - theirs.e2e_latency) <= max(step_time.values()) + SLACK_S
        assert ours.itl is not None
        longest = max(step_time.values())
        assert abs(ours.itl - theirs.mean_time_per_output_token) <= 2 * longest / 159 + 1e-3
    summary = insight.summary()
    assert summary["latency"]["finished"] == 4
    assert summary["preemptions"]["count"] == sum(final[r].num_preemptions for r in ids)
    assert summary["latency"]["all"]["e2e"]["max"] == pytest.approx(
        max(request_latency(final[r]).e2e or 0.0 for r in ids)
    )


def test_one_step_requests_take_vllms_times_from_its_finished_stats(
    vllm_finished: dict[str, Any],
) -> None:
    """A request scheduled, answered and finished in one step is gone from vLLM's output
    processor when ``step()`` returns: its times come from ``FinishedRequestStats``."""
    ids = ["one-a", "one-b"]
    with _running() as driver:
        for rid in ids:
            _add(driver, rid, "def foo(x): return x + " * 8, temperature=0, max_tokens=1)
        final = _final(_wait_done(driver, ids))
    for rid in ids:
        t, theirs = final[rid].timings, vllm_finished[rid]
        assert t.scheduled is not None and t.first_token is not None
        assert t.arrival < t.scheduled < t.first_token
        assert (t.first_token - t.scheduled) == pytest.approx(theirs.prefill_time, abs=2e-3)
        assert (t.scheduled - t.arrival) - theirs.queued_time <= SLACK_S
