"""``stepview --attach ADDRESS --headless --json`` on a real engine core.

vLLM runs with its core in its own process, publishing; the real command watches it from a
child process while this test is the client that adds the requests and reads vLLM's outputs.
Every JSON line the watcher prints must carry what vLLM told the client (token ids, finish
reasons, every sample of ``n=2``), and Ctrl+C must end it normally.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from stepview.model.sampling import SamplingSpec
from tests.engine.watch.attach_helpers import warm_up, watch_command, watching
from tests.vllm_engines import EnginePool

pytestmark = pytest.mark.engine

WORKLOAD = [
    ("greedy", "The tide came in", SamplingSpec(temperature=0.0, max_tokens=30)),
    ("pair", "Two roads", SamplingSpec(temperature=0.8, seed=1, n=2, max_tokens=20)),
]


def test_headless_watcher_prints_what_the_client_got(engines: EnginePool, tmp_path: Path) -> None:
    engine = engines.get(multiprocess=True, max_num_seqs=3)
    address = engine.facts_address
    assert address is not None
    with watching(watch_command(address, tmp_path)) as watch:
        watch.err.wait_for("stepview: watching", timeout=60)

        def seen(request_id: str, timeout: float) -> bool:
            try:
                watch.out.wait_for(f'"id": "{request_id}"', timeout=timeout)
            except AssertionError:
                return False
            return True

        warm_up(engine, seen)  # from now on every record reaches the watcher
        for request_id, prompt, spec in WORKLOAD:
            engine.add_request(request_id, prompt, spec)
        client: dict[str, dict[int, tuple[list[int], str | None]]] = {}
        while engine.has_unfinished():
            for output in engine.step().outputs:
                for c in output.completions:
                    client.setdefault(output.request_id, {})[c.index] = (
                        list(c.token_ids),
                        c.finish_reason,
                    )
        printed = {}
        for request_id, _, _ in WORKLOAD:
            line = json.loads(watch.out.wait_for(f'"id": "{request_id}"', timeout=30))
            printed[request_id] = {
                c["index"]: (c["token_ids"], c["finish_reason"]) for c in line["completions"]
            }
            assert line["state"] == "finished"
            assert line["timeline"][-1]["state"] == "decode"
        assert printed == client
        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(30) == 0
        assert any("stopped watching" in line for line in watch.err.rest())
