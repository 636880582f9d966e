"""The exporter's figures against hand-made snapshots: every metric, from what it is made of.

Waiting requests are counted by reason from two sources, the queue's shared reason for those
without one of their own (the engine's waiting count less the others) and each request's own;
the counting must follow what a step changed, not walk every waiting request.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from unittest import mock

import pytest

from stepview.insight.run import RunInsight
from stepview.metrics.exporter import MetricsExporter, oldest_waiting
from stepview.metrics.waiting import REASONS, WaitingByReason
from stepview.model.active import CHUNK
from stepview.model.alerts import KV_FULL, STALL, THRASH, Alert
from stepview.model.engine_api import LinkState
from stepview.model.grow import Frozen
from stepview.model.scheduling import (
    DEFERRED,
    KV_CACHE,
    MAX_NUM_SEQS,
    NOT_ADMITTED,
    TOKEN_BUDGET,
    StepBudget,
    WaitReason,
)
from stepview.model.snapshot import (
    Completion,
    EngineCounters,
    EngineInfo,
    EngineState,
    RankStatus,
    RequestState,
    RequestView,
)
from tests.metrics.build import Run, feed, nonzero, value, view, waiting

SEQS = WaitReason(MAX_NUM_SEQS, "all 4 running slots taken (max_num_seqs)")
SPENT = WaitReason(TOKEN_BUDGET, "budget 64 spent")


@pytest.fixture
def exporter() -> MetricsExporter:
    return MetricsExporter(process=False)


def test_waiting_by_queue_reason_and_own_reasons(exporter: MetricsExporter) -> None:
    run = Run()
    run.add(
        *(view(f"r{i}", RequestState.DECODING, arrival=0.1) for i in range(2)),
        view("blocked", reason=KV_CACHE, arrival=0.2),
        view("evicted", RequestState.PREEMPTED, reason=KV_CACHE, arrival=0.3),
        *(view(f"w{i}", arrival=0.5) for i in range(8)),
        view("queued", RequestState.PENDING, reason=NOT_ADMITTED, arrival=0.9),
    )
    exporter.on_snapshot(run.snapshot(1, queue_reasons=(SEQS,)), ())
    assert waiting(exporter).keys() == set(REASONS)  # every reason's series, zeros too
    assert nonzero(waiting(exporter)) == {MAX_NUM_SEQS: 8, KV_CACHE: 2, NOT_ADMITTED: 1}

    run.change("w3", wait_reason=WaitReason(DEFERRED, "waiting for its grammar"))
    exporter.on_snapshot(run.snapshot(2, queue_reasons=(SEQS,)), ())
    assert nonzero(waiting(exporter)) == {
        MAX_NUM_SEQS: 7,
        KV_CACHE: 2,
        DEFERRED: 1,
        NOT_ADMITTED: 1,
    }

    # The queue's reason changes: nobody's view does, all who share it move at once.
    exporter.on_snapshot(run.snapshot(3, queue_reasons=(SPENT,)), ())
    assert nonzero(waiting(exporter)) == {
        TOKEN_BUDGET: 7,
        KV_CACHE: 2,
        DEFERRED: 1,
        NOT_ADMITTED: 1,
    }

    # Admitted, scheduled, finished: the own reasons go with the requests.
    run.change("queued", state=RequestState.WAITING, wait_reason=None)
    run.change("blocked", state=RequestState.PREFILLING, wait_reason=None)
    run.remove("evicted", "w3")
    exporter.on_snapshot(run.snapshot(4, queue_reasons=(SPENT,)), ())
    assert nonzero(waiting(exporter)) == {TOKEN_BUDGET: 8}

    # No reason shared (none told, or the plug-in is off): counted, as unknown.
    exporter.on_snapshot(run.snapshot(5), ())
    assert nonzero(waiting(exporter)) == {"unknown": 8}


def test_waiting_is_counted_from_what_changed(exporter: MetricsExporter) -> None:
    looked_at: list[int] = []

    class Counting(WaitingByReason):
        def _add(self, views: Iterable[RequestView], sign: int) -> None:
            views = list(views)
            looked_at.append(len(views))
            super()._add(views, sign)

    exporter._waiting = Counting()
    run = Run()
    run.add(*(view(f"w{i}", arrival=i * 0.001) for i in range(10_000)))
    exporter.on_snapshot(run.snapshot(1, queue_reasons=(SEQS,)), ())
    assert waiting(exporter)[MAX_NUM_SEQS] == 10_000
    looked_at.clear()
    run.change("w5000", wait_reason=WaitReason(DEFERRED, "set aside"))
    exporter.on_snapshot(run.snapshot(2, queue_reasons=(SEQS,)), ())
    assert nonzero(waiting(exporter)) == {MAX_NUM_SEQS: 9_999, DEFERRED: 1}
    assert sum(looked_at) <= 2 * CHUNK  # the one chunk that changed, before and after
    looked_at.clear()
    exporter.on_snapshot(run.snapshot(3, queue_reasons=(SPENT,)), ())
    assert sum(looked_at) == 0
    assert nonzero(waiting(exporter)) == {TOKEN_BUDGET: 9_999, DEFERRED: 1}


def test_ranks_label_each_queue_and_say_which_are_reached(exporter: MetricsExporter) -> None:
    run = Run()
    run.add(
        *(view(f"a{i}@0") for i in range(3)),
        *(view(f"b{i}@2", queue=1) for i in range(4)),
        view("c@2", queue=1, reason=KV_CACHE),
    )
    ranks = (RankStatus(0, True, running=4, waiting=3), RankStatus(2, False, waiting=5))
    reasons = (SEQS, None)
    counters = EngineCounters(waiting=8)
    exporter.on_snapshot(run.snapshot(1, ranks=ranks, queue_reasons=reasons, counters=counters), ())
    assert nonzero(waiting(exporter, "0")) == {MAX_NUM_SEQS: 3}
    assert nonzero(waiting(exporter, "2")) == {KV_CACHE: 1, "unknown": 4}
    assert value(exporter, "stepview_rank_connected", rank="0") == 1
    assert value(exporter, "stepview_rank_connected", rank="2") == 0
    back = (ranks[0], ranks[1]._replace(connected=True))
    exporter.on_snapshot(run.snapshot(2, ranks=back, queue_reasons=reasons, counters=counters), ())
    assert value(exporter, "stepview_rank_connected", rank="2") == 1


def test_budget_by_kind_per_step_and_in_total(exporter: MetricsExporter) -> None:
    run = Run()
    first = StepBudget(2048, 100, 20, 50, 100)
    feed(exporter, [run.snapshot(1, budget=first), run.snapshot(1, budget=first)])
    figures = {
        k: value(exporter, "stepview_step_budget_tokens", kind=k)
        for k in ("prefill", "decode", "unused")
    }
    assert figures == {"prefill": 100, "decode": 20, "unused": 1928}
    exporter.on_snapshot(run.snapshot(2, budget=StepBudget(2048, 0, 30, 50, 100)), ())
    assert value(exporter, "stepview_step_budget_tokens", kind="prefill") == 0
    totals = {
        k: value(exporter, "stepview_budget_tokens_total", kind=k)
        for k in ("prefill", "decode", "unused")
    }
    # A snapshot between steps (a command) repeats the step's budget: counted once.
    assert totals == {"prefill": 100, "decode": 50, "unused": 1928 + 2018}
    assert value(exporter, "stepview_steps_total") == 2


def test_oldest_waiting_is_the_first_waiting_from_the_front(exporter: MetricsExporter) -> None:
    run = Run()
    run.add(
        view("old-runner", RequestState.DECODING, arrival=1.0),
        view("first-waiting", RequestState.PREEMPTED, arrival=2.0),
        view("later", arrival=3.0),
        view("pending", RequestState.PENDING, reason=NOT_ADMITTED, arrival=4.0),
    )
    snapshot = run.snapshot(1, clock=10.0)
    assert oldest_waiting(snapshot.active) is run.views["first-waiting"]
    exporter.on_snapshot(snapshot, ())
    assert value(exporter, "stepview_oldest_waiting_request_age_seconds") == 8.0
    run.remove("first-waiting", "later", "pending")
    exporter.on_snapshot(run.snapshot(2, clock=11.0), ())
    assert value(exporter, "stepview_oldest_waiting_request_age_seconds") == 0


def test_alerts_active_by_kind_and_raised(exporter: MetricsExporter) -> None:
    run = Run()

    def alert(kind: str, request_id: str | None = None) -> Alert:
        return Alert(kind, 1, 1.0, f"{kind} alert", request_id)

    two_thrash_and_stall = (alert(THRASH, "a"), alert(THRASH, "b"), alert(STALL))
    feed(
        exporter,
        [
            run.snapshot(1, alerts=two_thrash_and_stall),
            run.snapshot(2, alerts=two_thrash_and_stall),
            run.snapshot(3, alerts=(alert(THRASH, "a"),)),
        ],
    )
    active = {
        k: value(exporter, "stepview_active_alerts", kind=k) for k in (THRASH, STALL, KV_FULL)
    }
    assert active == {THRASH: 1, STALL: 0, KV_FULL: 0}
    exporter.on_snapshot(run.snapshot(4, alerts=(alert(THRASH, "a"), alert(STALL))), ())
    raised = {
        k: value(exporter, "stepview_alerts_raised_total", kind=k) for k in (THRASH, STALL, KV_FULL)
    }
    assert raised == {THRASH: 2, STALL: 2, KV_FULL: 0}  # a stall that came back: raised again


def test_preemptions_and_tokens_lost_from_the_insight() -> None:
    insight = RunInsight()
    exporter = MetricsExporter(insight, process=False)
    run = Run()
    run.add(view("p", RequestState.PREFILLING, prompt_tokens=8, computed_prompt_tokens=8))
    steps = [run.snapshot(1)]
    run.change(
        "p",
        state=RequestState.DECODING,
        completions=(Completion.of_text(0, "abc", token_ids=Frozen([1, 2, 3])),),
    )
    steps.append(run.snapshot(2))
    run.change("p", state=RequestState.PREEMPTED, computed_prompt_tokens=0, num_preemptions=1)
    steps.append(run.snapshot(3))
    for snapshot in steps:
        insight.observe(snapshot)
        exporter.on_snapshot(snapshot, ())
    assert value(exporter, "stepview_preemptions_total") == 1
    # Its prompt and every output token but the last sampled one had their KV computed.
    assert value(exporter, "stepview_preemption_lost_tokens_total") == 8 + 2
    assert insight.summary()["preemptions"]["tokens_lost"] == 10


def test_behind_state_and_engine(exporter: MetricsExporter) -> None:
    run = Run()
    exporter.on_snapshot(run.snapshot(1), ())
    assert value(exporter, "stepview_view_behind_seconds") == 0  # an engine of one's own
    exporter.link = lambda: LinkState(EngineState.RUNNING, "view 4 s behind", (), 3.5)
    info = EngineInfo(model="m", vllm_version="0.32.0", attached="tcp://127.0.0.1:5570")
    snapshot = run.snapshot(2, info=info)
    exporter.on_snapshot(snapshot, ())
    assert value(exporter, "stepview_view_behind_seconds") == 3.5
    assert value(exporter, "stepview_engine_state", stepview_engine_state="running") == 1
    labels = {"model": "m", "vllm_version": "0.32.0", "attached": "tcp://127.0.0.1:5570"}
    assert value(exporter, "stepview_engine_info", **labels) == 1
    exporter.on_snapshot(replace(snapshot, engine_state=EngineState.DISCONNECTED), ())
    assert value(exporter, "stepview_engine_state", stepview_engine_state="running") == 0
    assert value(exporter, "stepview_engine_state", stepview_engine_state="disconnected") == 1


def test_plugin_active_follows_the_engine_info(exporter: MetricsExporter) -> None:
    """1 while the plug-in reports each request, 0 once it is off; set when that changes."""
    gauge = exporter.metrics.plugin_active
    assert value(exporter, "stepview_plugin_active") == 1  # before any snapshot: none said off
    run = Run()
    on = EngineInfo(model="m", attached="tcp://127.0.0.1:5570")
    renamed = replace(on, model="served @ tcp://127.0.0.1:5570")  # the API answered: still on
    off = replace(renamed, detailed_states=False)
    infos = (on, on, renamed, off, off, replace(off, detailed_states=True))
    seen = []
    with mock.patch.object(gauge, "set", wraps=gauge.set) as set_value:
        for step, info in enumerate(infos, 1):
            exporter.on_snapshot(run.snapshot(step, info=info), ())
            seen.append(value(exporter, "stepview_plugin_active"))
    assert seen == [1, 1, 1, 0, 0, 1]
    assert [call.args for call in set_value.call_args_list] == [(0,), (1,)]  # changes only


def test_requests_lost_unseen_count_once_each(exporter: MetricsExporter) -> None:
    """The link says how many so far; the counter goes up by what is new, never back."""
    run = Run()
    for step, unseen in ((1, 0), (2, 3), (3, 3), (4, 5)):
        exporter.link = lambda u=unseen: LinkState(EngineState.RUNNING, unseen=u)
        exporter.on_snapshot(run.snapshot(step), ())
    assert value(exporter, "stepview_requests_unseen_total") == 5


def test_a_failing_update_stops_the_metrics_not_the_engine(exporter: MetricsExporter) -> None:
    def broken() -> LinkState | None:
        raise RuntimeError("boom")

    exporter.link = broken
    run = Run()
    exporter.on_snapshot(run.snapshot(1), ())
    assert exporter.error == "metrics stopped at step 1: RuntimeError: boom"
    exporter.on_snapshot(run.snapshot(2), ())  # not again, not raised
    assert value(exporter, "stepview_steps_total") == 1
