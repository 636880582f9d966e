"""``--attach http://…``: one server's /metrics read into snapshots (a fake server, real pages).

The pages are vLLM 0.32's, captured from the demo model's API server: idle, with 40
completions running, and after they finished. The clock is the test's, so the window's
edges are exact.
"""

from __future__ import annotations

from stepview.engine.plugin.config import PLUGIN_QUALNAME
from stepview.engine.watch.api.api_key import ApiKey
from stepview.engine.watch.api.server_api import ServerApi
from stepview.engine.watch.metrics.metrics_watch import PLUGIN, MetricsWatch
from stepview.model.snapshot import EngineState
from tests.engine.watch.fake_metrics import MODEL, ROOT, FakeMetrics, capture, without


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def watch_of(fake: FakeMetrics, clock: Clock, window: float = 60.0) -> MetricsWatch:
    return MetricsWatch(ServerApi(fake.url), window=window, clock=clock)


def test_a_busy_server_then_its_finished_requests(fake_metrics: FakeMetrics) -> None:
    clock = Clock()
    watch = watch_of(fake_metrics, clock)
    assert watch.latest.engine_state is EngineState.STARTING
    idle = watch.scrape()
    assert idle.engine_state is EngineState.IDLE
    assert idle.info.model == f"{MODEL} @ {fake_metrics.url}"
    assert idle.info.attached == fake_metrics.url and not idle.info.detailed_states
    assert idle.server is not None and idle.server.latency("ttft").p50 is None  # empty window

    fake_metrics.page, clock.now = capture("busy"), 101.0
    busy = watch.scrape()
    assert busy.engine_state is EngineState.RUNNING
    assert (busy.counters.running, busy.counters.waiting) == (40, 0)
    assert 0.07 < busy.counters.kv_cache_usage < 0.08
    assert busy.counters.generation_tokens == 4001  # since the idle page, a second ago
    assert busy.recent[-1].generation_tokens == 4001 and busy.recent[-1].running == 40
    assert busy.server is not None
    assert dict(busy.server.waiting_by_reason) == {"capacity": 0, "deferred": 0}
    ttft = busy.server.latency("ttft")
    assert ttft.observed == 40 and ttft.p50 is not None and 0.04 < ttft.p50 < 0.08

    fake_metrics.page, clock.now = capture("after"), 102.0
    after = watch.scrape()
    assert after.engine_state is EngineState.IDLE and after.step == 3
    window = after.server
    assert window is not None
    assert dict(window.finished) == {"length": 40} and window.finished_total == 40
    e2e = window.latency("e2e")
    assert e2e.observed == 40 and e2e.p50 is not None and e2e.p99 is not None
    assert e2e.p50 <= e2e.p99
    assert window.steps_per_s is not None and window.steps_per_s > 0


def test_the_window_forgets_what_is_older_than_its_span(fake_metrics: FakeMetrics) -> None:
    clock = Clock()
    watch = watch_of(fake_metrics, clock, window=10.0)
    watch.scrape()
    fake_metrics.page, clock.now = capture("after"), 101.0
    assert watch.scrape().server.finished_in_window == 40  # type: ignore[union-attr]
    clock.now = 112.0
    later = watch.scrape().server
    assert later is not None and later.finished_in_window == 0
    assert later.latency("ttft").p50 is None and later.finished_total == 40


def test_a_server_that_stops_answering_is_disconnected_and_comes_back_restarted(
    fake_metrics: FakeMetrics,
) -> None:
    clock = Clock()
    watch = watch_of(fake_metrics, clock)
    watch.scrape()
    fake_metrics.page, clock.now = capture("after"), 101.0
    before = watch.scrape()
    fake_metrics.stop()
    clock.now = 102.0
    lost = watch.scrape()
    assert lost.engine_state is EngineState.DISCONNECTED
    assert lost.phase.startswith(f"DISCONNECTED from {fake_metrics.url}")
    assert lost.counters == before.counters and lost.server == before.server  # held

    fake_metrics.page = capture("idle")  # restarted: every counter back at 0
    fake_metrics.start()
    clock.now = 103.0
    back = watch.scrape()
    assert back.engine_state is EngineState.IDLE and back.phase == ""
    assert back.server is not None
    assert back.server.finished_in_window == 40  # kept, and nothing negative
    assert back.counters.generation_tokens == 0 and back.counters.preemptions == 0


def test_a_server_never_reached_is_starting_and_says_why(fake_metrics: FakeMetrics) -> None:
    fake_metrics.stop()
    snapshot = watch_of(fake_metrics, Clock()).scrape()
    assert snapshot.engine_state is EngineState.STARTING
    assert snapshot.phase.startswith(f"connecting to {fake_metrics.url}: ")
    # Its view's header names it, as a plug-in server's does (it said "model not known yet").
    assert snapshot.info.label == f"vLLM server at {fake_metrics.url}"


def test_an_older_vllm_without_some_series(fake_metrics: FakeMetrics) -> None:
    older = without(
        capture("after"),
        "num_requests_waiting_by_reason",
        "kv_cache_usage_perc",
        "e2e_request_latency_seconds",
        "iteration_tokens_total",
    )
    clock = Clock()
    watch = watch_of(fake_metrics, clock)
    fake_metrics.page = without(capture("idle"), "e2e_request_latency_seconds")
    watch.scrape()
    fake_metrics.page, clock.now = older, 101.0
    snapshot = watch.scrape()
    window = snapshot.server
    assert window is not None and window.waiting_by_reason == ()
    assert window.latency("e2e").p50 is None and window.latency("ttft").p50 is not None
    assert window.steps_per_s is None and snapshot.counters.kv_cache_usage == 0.0


def test_the_restart_line_names_this_server(fake_metrics: FakeMetrics) -> None:
    assert PLUGIN == PLUGIN_QUALNAME
    window = watch_of(fake_metrics, Clock()).scrape().server
    assert window is not None
    *serve, attach = window.plugin_hint.splitlines()
    assert serve == [
        "STEPVIEW_PUBLISH=tcp://127.0.0.1:5570 \\",
        "  python -m vllm.entrypoints.openai.api_server "
        f"--model {ROOT} --served-model-name {MODEL} --port {fake_metrics.port} \\",
        f"  --scheduler-cls {PLUGIN}",
    ]
    assert attach == f"stepview --attach tcp://127.0.0.1:5570 --api {fake_metrics.url}"

    fake_metrics.page = capture("dp2-busy")  # two data-parallel ranks: both restarted, watched
    window = watch_of(fake_metrics, Clock()).scrape().server
    assert window is not None
    *serve, attach = window.plugin_hint.splitlines()
    assert serve[1].endswith(f"--port {fake_metrics.port} --data-parallel-size 2 \\")
    assert attach.startswith("stepview --attach tcp://127.0.0.1:5570 --attach-ranks 2 --api")


def test_the_api_key_is_presented_on_metrics(fake_metrics: FakeMetrics) -> None:
    fake_metrics.api_key = "s3cret"
    refused = MetricsWatch(ServerApi(fake_metrics.url), clock=Clock()).scrape()
    assert refused.engine_state is EngineState.STARTING and "--api-key" in refused.phase
    key = ApiKey("VLLM_API_KEY", "s3cret")
    snapshot = MetricsWatch(ServerApi(fake_metrics.url, key), clock=Clock()).scrape()
    assert snapshot.engine_state is EngineState.IDLE
    assert fake_metrics.authorizations[-1] == "Bearer s3cret"
    assert "s3cret" not in repr(snapshot)


def test_a_data_parallel_server_has_a_row_per_rank(fake_metrics: FakeMetrics) -> None:
    """vLLM labels each engine core's series ``engine="r"``: the totals are summed (KV use is
    the ranks' mean) and each rank keeps its own figures, where an imbalance shows."""
    clock = Clock()
    watch = watch_of(fake_metrics, clock)
    assert watch.scrape().ranks == ()  # one engine core: no ranks of its own
    fake_metrics.page, clock.now = capture("dp2-busy"), 101.0  # --data-parallel-size 2
    both = watch.scrape()
    assert (both.counters.running, both.counters.waiting) == (150, 0)
    assert [(r.rank, r.connected, r.running, r.waiting) for r in both.ranks] == [
        (0, True, 75, 0),
        (1, True, 75, 0),
    ]
    assert 0.44 < both.ranks[0].kv_cache_usage == both.counters.kv_cache_usage < 0.45

    # Rank 1 behind: 30 waiting, its cache full; the totals and its own figures say so.
    uneven = fake_metrics.page.replace(
        'vllm:num_requests_waiting{engine="1",model_name="stepview-demo-tiny"} 0.0',
        'vllm:num_requests_waiting{engine="1",model_name="stepview-demo-tiny"} 30.0',
    ).replace(
        'vllm:kv_cache_usage_perc{engine="1",model_name="stepview-demo-tiny"} 0.4403131115459883',
        'vllm:kv_cache_usage_perc{engine="1",model_name="stepview-demo-tiny"} 1.0',
    )
    assert uneven.count("30.0") > fake_metrics.page.count("30.0")  # the page did change
    fake_metrics.page, clock.now = uneven, 102.0
    behind = watch.scrape()
    assert behind.counters.waiting == 30
    assert [(r.rank, r.waiting, r.kv_cache_usage) for r in behind.ranks] == [
        (0, 0, 0.4403131115459883),
        (1, 30, 1.0),
    ]

    fake_metrics.stop()  # down: each rank says so, its last figures kept
    clock.now = 103.0
    lost = watch.scrape()
    assert [(r.rank, r.connected, r.waiting) for r in lost.ranks] == [(0, False, 0), (1, False, 30)]
