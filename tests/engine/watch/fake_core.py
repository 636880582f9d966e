"""An engine core played by the real plug-in capture over a fake scheduler, publishing.

For the tests of a watch that falls behind: requests arrive, prefill in one step, decode one
token a step and finish at their length, as in vLLM's engine core, and the real
:class:`~stepview.engine.plugin.capture.CoreCapture` records every step to a real
:class:`~stepview.engine.plugin.publisher.FactsPublisher` (whose log of ends is the one a
server keeps). No model, no vLLM engine: only vLLM's request statuses, which the capture reads.
"""

from __future__ import annotations

import time

from stepview.engine.plugin.capture import CoreCapture
from stepview.engine.plugin.publisher import FactsPublisher
from tests.engine.plugin.fake_scheduler import FakeRequest, FakeScheduler, _output

PROMPT = 64  # prompt tokens of each request (its intro carries them all)


def token(number: int, position: int) -> int:
    """Output token ``position`` of request ``number``."""
    return (number * 7 + position) % 500 + 1


def tokens_of(number: int, length: int) -> list[int]:
    """The output token ids request ``number`` of ``length`` tokens ends with."""
    return [token(number, k) for k in range(length)]


def core_id(number: int) -> str:
    """Request ``number``'s engine-core id; a watch adopts it as ``req<number>``."""
    return f"req{number}-0123abcd"


class FakeCore:
    """One engine core stepping requests through the real capture, publishing to ``publisher``."""

    def __init__(self, publisher: FactsPublisher) -> None:
        self.scheduler = FakeScheduler({})
        self.scheduler.counts = (0, 0)
        self.capture = CoreCapture(self.scheduler)
        assert self.capture.failure is None
        self.capture.sink = publisher
        self.lengths: dict[int, int] = {}  # request number -> its output length
        self._finished: list[str] = []  # ended in the last update: the next output says so

    def add(self, number: int, length: int = 3) -> None:
        from vllm.v1.request import RequestStatus as RS

        request_id = core_id(number)
        self.lengths[number] = length
        self.scheduler.requests[request_id] = FakeRequest(
            RS.WAITING,
            PROMPT,
            prompt_token_ids=[number % 1000 + k for k in range(PROMPT)],
            max_tokens=length,
            request_id=request_id,
            arrival_time=time.time(),
        )
        self.capture.arrived(request_id)

    def step(self) -> None:
        """One ``schedule()`` and its update: everyone scheduled, those at length finish."""
        from vllm.v1.request import RequestStatus as RS

        scheduler, capture = self.scheduler, self.capture
        requests = scheduler.requests
        scheduled: dict[str, int] = {}
        for request_id, req in requests.items():
            if req.status == RS.WAITING:
                req.status = RS.RUNNING
                scheduled[request_id] = req.num_prompt_tokens
                req.num_computed_tokens = req.num_prompt_tokens
            else:
                scheduled[request_id] = 1
                req.num_computed_tokens += 1
        scheduler.counts = (len(requests), 0)
        capture.after_schedule(scheduler, _output(scheduled, finished=self._finished))
        before = capture.before_update(scheduler, _output(scheduled))
        finished = []
        for request_id in scheduled:
            req = requests[request_id]
            number = int(request_id[3:].partition("-")[0])
            req.output_token_ids.append(token(number, req.num_output_tokens))
            req.num_output_tokens += 1
            if req.num_output_tokens >= req.max_tokens:
                req.status = RS.FINISHED_LENGTH_CAPPED
                del requests[request_id]
                finished.append(request_id)
        scheduler.finished_req_ids = set(finished)
        self._finished = finished
        scheduler.counts = (len(requests), 0)
        capture.after_update(scheduler, before, _output(scheduled), {})

    def burst(self, first: int, count: int, per_step: int = 6, length: int = 3) -> None:
        """Requests ``first`` .. ``first + count - 1``, ``per_step`` arriving a step, all run
        to their end."""
        for start in range(first, first + count, per_step):
            for number in range(start, min(start + per_step, first + count)):
                self.add(number, length)
            self.step()
        while any(core_id(n) in self.scheduler.requests for n in range(first, first + count)):
            self.step()
