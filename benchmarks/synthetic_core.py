"""A synthetic vLLM engine core: a queue of requests stepped as vLLM's scheduler would, as the
plug-in's records of change, for the benchmarks that watch a server without running one.

``watch_memory`` feeds one watch a million requests as fast as it takes them (a full batch of
256, a queue that never empties); ``fleet_scale`` runs 48 at a server's pace (a few requests
running, steps at tens a second), each behind the plug-in's own publisher
(:mod:`stepview.engine.plugin.publisher`), so the watch reads the wire format a real server
sends. The requests are of realistic size (prompts and completions of 100 to 300 tokens), 1 in
``preempt_one_in`` is preempted once and recomputed, and new ones arrive to keep
``waiting_min`` in the queue: raising it is a burst of arrivals, seen in the next record.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from stepview.engine.records.facts import (
    EndedFacts,
    RequestFacts,
    RequestIntro,
    StepFacts,
)
from stepview.engine.records.request_states import CoreState

RUNNING_MAX = 256
WAITING_MIN = 64  # the queue never empties: new requests keep arriving behind it
BLOCK = 16
KV_BLOCKS = 8192
PREEMPT_ONE_IN = 40
WAITING, RUNNING, PREEMPTED = (
    int(CoreState.WAITING),
    int(CoreState.RUNNING),
    int(CoreState.PREEMPTED),
)


@dataclass
class Held:
    """One request the synthetic core holds."""

    req_id: str
    prompt: list[int]
    target: int  # output tokens it will generate
    arrival: float
    state: int = WAITING
    outputs: list[int] = field(default_factory=list)
    computed: int = 0
    preemptions: int = 0
    sent: int = 0  # outputs already published
    introduced: bool = False
    will_preempt: bool = False

    def facts(self, scheduled: int, block: int) -> RequestFacts:
        intro = None
        if not self.introduced:
            intro = RequestIntro(self.prompt, temperature=0.0, seed=1, ignore_eos=True)
            self.introduced = True
        new, self.sent = self.outputs[self.sent :], len(self.outputs)
        blocks = -(-self.computed // block)
        return RequestFacts(
            self.req_id, self.state, len(self.prompt), self.computed, len(self.outputs),
            self.preemptions, scheduled, blocks, 0, self.arrival, 0, self.target,
            new_token_ids=new, intro=intro,
        )  # fmt: skip


class SyntheticCore:
    """Steps a queue of requests the way vLLM's scheduler would, as records of change."""

    def __init__(
        self,
        total: int,
        tokens_per_step: int,
        seed: int = 0,
        *,
        running_max: int = RUNNING_MAX,
        waiting_min: int = WAITING_MIN,
        preempt_one_in: int = PREEMPT_ONE_IN,
        name: str = "soak",
        block: int = BLOCK,
    ) -> None:
        """``total`` requests in all; ``running_max`` at a time (vLLM's max_num_seqs); at
        least ``waiting_min`` queued behind them while requests remain to be made; KV blocks
        of ``block`` tokens (1: its KV use moves with every token)."""
        self.total = total
        self.per_step = tokens_per_step
        self.running_max = running_max
        self.waiting_min = waiting_min
        self.preempt_one_in = preempt_one_in
        self.name = name
        self.block = block
        self.random = random.Random(seed)
        self.vocabulary = [self.random.randrange(49152) for _ in range(4096)]
        self.made = 0
        self.finished = 0
        self.step = 0
        self.seq = 0
        self.started = time.time()
        self.waiting: list[Held] = []
        self.running: list[Held] = []

    def _new(self) -> Held:
        start = self.random.randrange(len(self.vocabulary) - 300)
        prompt = self.vocabulary[start : start + self.random.randint(100, 300)]
        held = Held(f"{self.name}-{self.made}-{self.made % 2**32:08x}", prompt, 0, time.time())
        held.target = self.random.randint(100, 300)
        held.will_preempt = self.made % self.preempt_one_in == 0
        self.made += 1
        return held

    def next_record(self, full: bool) -> StepFacts:
        """One step: admit from the head of the queue, decode, finish, preempt, arrive."""
        self.step += 1
        self.seq += 1
        changed: dict[str, tuple[Held, int]] = {}
        prefill = decode = 0
        while len(self.running) < self.running_max and self.waiting:
            held = self.waiting.pop(0)
            held.state = RUNNING
            todo = len(held.prompt) + len(held.outputs) - held.computed
            held.computed += todo
            prefill += todo
            held.outputs.append(self.vocabulary[self.step % len(self.vocabulary)])
            self.running.append(held)
            changed[held.req_id] = (held, todo)
        ended: list[EndedFacts] = []
        still: list[Held] = []
        for held in self.running:
            if held.req_id not in changed:
                n = min(self.per_step, held.target - len(held.outputs))
                at = held.computed % 4000
                held.outputs.extend(self.vocabulary[at : at + n])
                held.computed += n
                decode += n
                changed[held.req_id] = (held, n)
            if len(held.outputs) >= held.target:
                ended.append(EndedFacts(held.req_id, len(held.outputs), held.outputs, "length"))
                del changed[held.req_id]
            else:
                still.append(held)
        self.running = still
        preempted: list[str] = []
        victim = next((h for h in reversed(self.running) if h.will_preempt and h.outputs), None)
        if victim is not None and len(victim.outputs) > victim.target // 2:
            self.running.remove(victim)
            victim.will_preempt = False
            victim.state, victim.computed = PREEMPTED, 0
            victim.preemptions += 1
            self.waiting.insert(0, victim)  # vLLM puts it back at the head of the queue
            preempted.append(victim.req_id)
            changed[victim.req_id] = (victim, 0)
        while len(self.waiting) < self.waiting_min and self.made < self.total:
            held = self._new()
            self.waiting.append(held)
            changed[held.req_id] = (held, 0)
        self.finished += len(ended)
        if full:  # a new subscriber: every request the core holds, whole
            for held in (*self.running, *self.waiting):
                held.introduced, held.sent = False, 0
                changed.setdefault(held.req_id, (held, 0))
        block = self.block
        requests = [held.facts(scheduled, block) for held, scheduled in changed.values()]
        used = sum(-(-h.computed // block) for h in self.running)
        return StepFacts(
            self.step, self.step, time.time(), self.started, 0, self.seq, full,
            8192, prefill, decode, self.running_max, len(self.running), len(self.waiting),
            KV_BLOCKS - used, KV_BLOCKS, block, preempted, [e.req_id for e in ended],
            requests, not self.running and not self.waiting, ended,
            self.waiting[0].req_id if self.waiting else None,
        )  # fmt: skip
