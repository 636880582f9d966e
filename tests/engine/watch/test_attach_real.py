"""``stepview --attach`` on a real engine core: vLLM's, publishing, watched from outside.

stepview's own engine runs vLLM with the core in its own process; the core's plug-in
publishes on a private address, and an :class:`AttachedEngine` subscribes there too, as
``stepview --attach`` would to a server. What the attached side reconstructs from the records
alone (ids, sampling, every output token, finish reasons, aborts) must match what vLLM's
outputs said to the client that added the requests.
"""

from __future__ import annotations

import time

import pytest

from stepview.engine.driver.ledger import RequestLedger
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.engine.watch.link.watched_core import ABORTED_BY_CLIENT
from stepview.model.address import plugin_records
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState, RequestView
from tests.engine.watch.attach_helpers import warm_up
from tests.vllm_engines import EnginePool

pytestmark = pytest.mark.engine

S = RequestState
WORKLOAD = [
    # Aborted at the client's fifth step: long enough that the core, which steps on its own,
    # cannot finish it first even when the test process is descheduled for a second.
    ("stopped", "Numbers:", SamplingSpec(temperature=0.0, max_tokens=480, ignore_eos=True)),
    ("greedy", "The tide came in", SamplingSpec(temperature=0.0, max_tokens=40)),
    ("seeded", "Once upon a time", SamplingSpec(temperature=0.9, seed=5, max_tokens=25)),
    ("pair", "Two roads", SamplingSpec(temperature=0.8, seed=1, n=2, max_tokens=30)),
    ("short", "x", SamplingSpec(temperature=0.0, max_tokens=1)),
]


def test_the_attached_view_matches_what_the_client_saw(engines: EnginePool) -> None:
    engine = engines.get(multiprocess=True, max_num_seqs=3)
    address = engine.facts_address
    assert address is not None
    attached = AttachedEngine(plugin_records(address))
    clock = [0.0]
    ledger = RequestLedger(lambda: clock[0])
    try:
        deadline = time.monotonic() + 10
        while attached.link().state.value == "starting":
            attached.has_unfinished()
            assert time.monotonic() < deadline, "the attached engine did not connect"
            time.sleep(0.02)
        warm = RequestLedger(lambda: 0.0)  # the warm-up's, apart from the workload's

        def seen(request_id: str, timeout: float) -> bool:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                while attached.has_unfinished():
                    warm.apply(attached.step(), 0.0)
                if any(v.request_id == request_id for v in warm.finished()):
                    return True
                time.sleep(0.01)
            return False

        warm_up(engine, seen)  # from now on every record reaches the attached engine

        def watch() -> None:
            while attached.has_unfinished():
                clock[0] += 0.001
                ledger.apply(attached.step(), clock[0])

        for request_id, prompt, spec in WORKLOAD:
            engine.add_request(request_id, prompt, spec)
        client: dict[str, dict[int, tuple[list[int], str | None]]] = {}
        steps = 0
        while engine.has_unfinished():
            result = engine.step()
            steps += 1
            for out in result.outputs:
                for c in out.completions:
                    sample = (list(c.token_ids), c.finish_reason)
                    client.setdefault(out.request_id, {})[c.index] = sample
            if steps == 5:
                engine.abort(["stopped"])  # its client stops it
            watch()
        deadline = time.monotonic() + 10
        while len(ledger.finished()) < len(WORKLOAD):
            assert time.monotonic() < deadline, [v.request_id for v in ledger.active()]
            watch()
            time.sleep(0.01)
    finally:
        attached.shutdown()

    seen: dict[str, RequestView] = {}
    for view in ledger.finished():
        request_id = view.request_id
        # vLLM's core id is "<the client's id>-<8 hex>" ("<i>_..." per sample): read back.
        assert request_id not in seen, f"{request_id} twice"
        seen[request_id] = view
    assert sorted(seen) == sorted(r for r, _, _ in WORKLOAD)
    for request_id, _, spec in WORKLOAD:
        view = seen[request_id]
        assert view.spec == spec, request_id  # the intro carried the sampling parameters
        assert view.prompt_token_ids, request_id
        assert view.prompt == f"({len(view.prompt_token_ids)} prompt tokens)"
        if request_id == "stopped":
            assert (view.state, view.error) == (S.ABORTED, ABORTED_BY_CLIENT)
            # Its tokens up to the abort (the core may have run a step ahead of the client).
            got, told = list(view.completions[0].token_ids), client["stopped"][0][0]
            assert len(got) >= 4 and got[: len(told)] == told[: len(got)]
            continue
        assert view.state is S.FINISHED, request_id
        samples = {c.index: (list(c.token_ids), c.finish_reason) for c in view.completions}
        assert samples == client[request_id], request_id
