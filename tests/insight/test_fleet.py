"""The fleet's rows and its busiest/idlest rule (stepview.insight.fleet)."""

from __future__ import annotations

from dataclasses import replace

from stepview.insight.fleet import (
    BUSIEST,
    IDLEST,
    FleetRow,
    fleet_record,
    fleet_row,
    mark_imbalance,
    shown_labels,
)
from stepview.model.server_window import NOT_VLLM, Latency, ServerWindow
from stepview.model.snapshot import (
    EngineCounters,
    EngineInfo,
    EngineState,
    RankStatus,
    RecentStep,
    StepSnapshot,
)
from tests.insight.build import S, snap, view


def row(name: str, waiting: int = 0, kv: float = 0.0, state: str = "running") -> FleetRow:
    return FleetRow(address=name, state=state, waiting=waiting, kv_cache_usage=kv)


def marks(rows: list[FleetRow]) -> dict[str, str]:
    return {r.address: r.mark for r in mark_imbalance(rows) if r.mark}


def test_all_equal_marks_nobody() -> None:
    assert marks([row("a", 5, 0.5), row("b", 5, 0.5), row("c", 5, 0.5)]) == {}


def test_one_server_is_never_marked() -> None:
    assert marks([row("a", 40, 0.99)]) == {}


def test_small_spread_is_noise() -> None:
    assert marks([row("a", 3, 0.30), row("b", 0, 0.10)]) == {}


def test_waiting_spread_marks_busiest_and_idlest() -> None:
    rows = [row("a", 2, 0.4), row("b", 9, 0.5), row("c", 5, 0.9)]
    assert marks(rows) == {"b": BUSIEST, "a": IDLEST}


def test_kv_spread_alone_marks_and_breaks_waiting_ties() -> None:
    assert marks([row("a", 1, 0.9), row("b", 1, 0.2)]) == {"a": BUSIEST, "b": IDLEST}


def test_a_down_server_takes_no_part() -> None:
    # Its last figures say 50 waiting, but it is down: the two up servers are balanced.
    rows = [row("a", 50, 0.9, state="down"), row("b", 1, 0.2), row("c", 2, 0.3)]
    assert marks(rows) == {}
    # With one server up, nobody is marked either.
    assert marks([row("a", 0, state="down"), row("b", 30, 0.9)]) == {}


def test_marks_are_recomputed_not_kept() -> None:
    marked = mark_imbalance([row("a", 10), row("b", 0)])
    balanced = [replace(r, waiting=1) for r in marked]
    assert [r.mark for r in mark_imbalance(balanced)] == ["", ""]


def metrics_snapshot(state: EngineState = EngineState.RUNNING) -> StepSnapshot:
    address = "http://h:8000"
    return StepSnapshot(
        step=30,
        clock=30.0,
        engine_state=state,
        info=EngineInfo(model=f"tiny @ {address}", attached=address, detailed_states=False),
        counters=EngineCounters(running=2, waiting=4, kv_cache_usage=0.5),
        recent=tuple(
            RecentStep(i, float(i), 1.0, 2, 4, 0.5, 10 if i > 20 else 0) for i in range(1, 31)
        ),
        server=ServerWindow(
            address=address,
            span=60.0,
            covered=30.0,
            latencies=(Latency("ttft", 0.2, 0.4, 0.8, 6),),
            waiting_by_reason=(("deferred", 1), ("capacity", 3)),
            preemptions=3,
        ),
    )


def test_a_metrics_row_reads_the_scrape() -> None:
    got = fleet_row("http://h:8000", metrics_snapshot(), window=60.0)
    assert (got.state, got.model, got.running, got.waiting) == ("running", "tiny", 2, 4)
    assert got.waiting_by_reason == (("capacity", 3), ("deferred", 1))
    assert (got.ttft_p50, got.ttft_p99) == (0.2, 0.8)
    assert got.preemptions_per_min == 6.0  # 3 in the 30 s seen so far
    assert got.tokens_per_s == 100 / 30  # 10 scrapes of 10 tokens in the 30 s seen, idle too
    assert not got.per_request
    record = fleet_record(got)
    assert record["address"] == "http://h:8000" and record["mark"] is None
    assert record["labels"] == {}
    assert record["behind_s"] is None  # a /metrics watch reads no records: never behind
    assert fleet_record(replace(got, behind=1.234))["behind_s"] == 1.23
    assert record["read_at"] is None  # never read yet
    assert fleet_record(replace(got, read_at=1796231659.60349))["read_at"] == 1796231659.603


def test_a_listed_servers_labels_go_with_its_row_and_record() -> None:
    """Prometheus adds ``instance`` (HOST:PORT) to every target: shown only where it says
    more than the address; the record keeps every label."""
    labels = (("instance", "h:8000"), ("job", "vllm"), ("zone", "a"))
    got = fleet_row("http://h:8000", metrics_snapshot(), 60.0, labels)
    assert shown_labels(got) == "job=vllm zone=a"
    assert fleet_record(got)["labels"] == {"instance": "h:8000", "job": "vllm", "zone": "a"}
    behind = fleet_row("http://lb:80/vllm-a", metrics_snapshot(), 60.0, labels)
    assert shown_labels(behind) == "instance=h:8000 job=vllm zone=a"


def test_a_down_server_keeps_its_figures_but_says_down() -> None:
    got = fleet_row("http://h:8000", metrics_snapshot(EngineState.DISCONNECTED), 60.0)
    assert got.state == "down" and not got.up and got.waiting == 4


def test_a_plugin_row_reads_requests() -> None:
    finished = [
        view("old", S.FINISHED, arrival=0.0, first_token=5.0, finished=6.0, preemptions=7),
        view("f1", S.FINISHED, arrival=50.0, first_token=50.5, finished=52.0, preemptions=1),
        view("f2", S.FINISHED, arrival=60.0, first_token=61.5, finished=62.0),
    ]
    active = [
        view("w1", S.WAITING, arrival=63.0, reason="budget"),
        view("w2", S.PREEMPTED, arrival=63.0, preemptions=2, reason="budget"),
        view("r1", S.DECODING, arrival=61.0, first_token=62.0),
    ]
    snapshot = replace(
        snap(100, 70.0, active, finished),
        info=EngineInfo(model="tiny @ tcp://h:5570", attached="tcp://h:5570"),
        ranks=(RankStatus(0, True, 1, 2, 0.3), RankStatus(1, False)),
    )
    got = fleet_row("tcp://h:5570", snapshot, window=30.0)
    assert got.per_request and got.model == "tiny"
    assert got.waiting_by_reason == (("budget", 2),)
    assert got.ttft_p50 == 1.0  # f1's 0.5 s and f2's 1.5 s; "old" is out of the window
    assert got.preemptions_per_min == 6.0  # 1 (f1) + 2 (w2) in 30 s
    assert [(r.rank, r.connected) for r in got.ranks] == [(0, True), (1, False)]
    assert fleet_record(got)["ranks"][1] == {
        "rank": 1,
        "up": False,
        "running": 0,
        "waiting": 0,
        "kv_cache_usage": 0.0,
    }


def test_a_server_not_reached_yet_has_no_figures() -> None:
    snapshot = StepSnapshot(step=0, clock=3.0, engine_state=EngineState.STARTING)
    got = fleet_row("tcp://h:1", snapshot, 60.0)
    assert got.state == "connecting" and got.ttft_p50 is None and got.tokens_per_s is None


def test_a_port_serving_another_programs_metrics_says_what_it_found() -> None:
    """The phase as :class:`~stepview.engine.watch.metrics.metrics_watch.MetricsWatch` words it."""
    found = "Prometheus text with no vLLM series (it looks like node_exporter)"
    phase = f"connecting to http://h:9100: {NOT_VLLM}{found}; trying again"
    snapshot = StepSnapshot(step=0, clock=3.0, engine_state=EngineState.STARTING, phase=phase)
    got = fleet_row("http://h:9100", snapshot, 60.0)
    assert got.state == "not vLLM" and got.model == found and not got.up


def test_a_data_parallel_metrics_server_gets_a_row_per_rank() -> None:
    ranks = (RankStatus(0, True, 2, 0, 0.25), RankStatus(1, True, 0, 4, 1.0))
    got = fleet_row("http://h:8000", replace(metrics_snapshot(), ranks=ranks), window=60.0)
    assert not got.per_request
    assert [(r.rank, r.connected, r.running, r.waiting) for r in got.ranks] == [
        (0, True, 2, 0),
        (1, True, 0, 4),
    ]
    assert [r["waiting"] for r in fleet_record(got)["ranks"]] == [0, 4]


def test_tokens_per_s_of_a_server_stepping_faster_than_the_strip_keeps() -> None:
    """A busy plug-in server makes hundreds of steps a second and the snapshot keeps the last
    120: they cover 1.2 s of the 60 s window, so the rate is over what they cover (the
    tokens of the steps let go are not known), not their tokens over the whole window."""
    recent = tuple(RecentStep(i, 100.0 + i * 0.01, 0.01, 32, 0, 0.5, 32) for i in range(1001, 1121))
    busy = replace(metrics_snapshot(), step=1120, clock=recent[-1].clock, recent=recent)
    got = fleet_row("http://h:8000", busy, window=60.0).tokens_per_s
    assert got is not None and abs(got - 3200.0) < 1e-6  # 119 steps of 32 tokens in 1.19 s
