"""vLLM's own times, attached to a real engine core: the plug-in's records carry them.

stepview's own engine runs vLLM with its core in a process of its own and publishing; a
:class:`Driver` watches the core through an :class:`AttachedEngine`, as ``stepview --attach``
would a server. The attached views must split queue, prefill and decode where vLLM does (the
queue ends at the core's SCHEDULED event, not at the end of the prefill step), and the
detail view's timings must agree with the request's timeline.
"""

from __future__ import annotations

import pytest

from stepview.engine.driver.loop import Driver
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.insight.timeline import timeline_of
from stepview.model.address import plugin_records
from stepview.model.latency import request_latency
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestView
from tests.engine.watch.attach_helpers import warm_up
from tests.helpers import wait_for
from tests.vllm_engines import EnginePool

pytestmark = pytest.mark.engine

PROMPT = "The tide came in over the flats"  # prefilled in one step
IDS = [f"t{i}" for i in range(5)]


def test_attached_timings_are_vllms_and_agree_with_the_timeline(engines: EnginePool) -> None:
    engine = engines.get(multiprocess=True, max_num_seqs=2)
    address = engine.facts_address
    assert address is not None
    driver = Driver(lambda phase: AttachedEngine(plugin_records(address)), read_only="no --api")
    driver.start()
    try:
        wait_for(driver, lambda s: s.engine_state is not EngineState.STARTING, timeout=10)

        def seen(request_id: str, timeout: float) -> bool:
            try:
                wait_for(
                    driver, lambda s: any(v.request_id == request_id for v in s.finished), timeout
                )
            except AssertionError:
                return False
            return True

        warm_up(engine, seen)
        spec = SamplingSpec(temperature=0.0, max_tokens=12, ignore_eos=True)
        for request_id in IDS:  # two run, three queue behind them
            engine.add_request(request_id, PROMPT, spec)
        vllm_prefill: dict[str, float] = {}  # vLLM's, as its output processor told the client
        while engine.has_unfinished():
            for request_id, stamp in engine.step().stamps.items():
                vllm_prefill[request_id] = stamp.scheduled_ago - stamp.first_token_ago

        def done(snap: object) -> bool:
            return all(any(v.request_id == r for v in driver.latest().finished) for r in IDS)

        wait_for(driver, done, timeout=10)
        history = list(driver.history())
        final = {v.request_id: v for v in driver.latest().finished if v.request_id in IDS}
    finally:
        driver.stop()
    for request_id in IDS:
        view: RequestView = final[request_id]
        t = view.timings
        latency = request_latency(view)
        assert t.scheduled is not None and t.first_token is not None
        assert latency.queue is not None and latency.ttft is not None
        assert latency.queue < latency.ttft, request_id  # the prefill is not in the queue
        # vLLM's prefill_time (first SCHEDULED event to the first token's outputs), as the
        # client in the core's own host read it: the records carried the same two instants.
        assert t.first_token - t.scheduled == pytest.approx(vllm_prefill[request_id], abs=1e-4)
        timeline = timeline_of(history, request_id)
        assert timeline is not None
        segments = timeline.segments
        decode = next(s for s in segments if s.state == "decode")
        prefill = next(s for s in segments if s.state != "waiting")
        # The detail view's timings and its timeline: one source.
        assert decode.start == pytest.approx(t.first_token, abs=1e-3), request_id
        assert prefill.start == pytest.approx(t.scheduled, abs=1e-3), request_id
