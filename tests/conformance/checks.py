"""Every record the plug-in makes, checked against the scheduler's own state.

A subscriber keeps the latest facts of each request and applies each record on top (records
carry only what changed). :class:`Checker` does the same with the records a :class:`Rig`
collects and, right after each ``schedule()`` (when a record describes the scheduler as it
is), compares that view with what the scheduler holds: the same requests, each with the
state, prompt and computed tokens, outputs, preemptions and KV blocks vLLM has; this step's
scheduled tokens and preemptions; the queues' sizes and the free blocks; which requests vLLM
set aside, and that the request named as where its scan stopped is in one of its waiting
queues (the KV-load queue too, from 0.34); :meth:`Checker.reasons` reads every waiting
request's reason from that view, as the app does. Across the run, each
request that left is in exactly one record's ``finished`` and ends (``ended``) exactly once,
with its last token count. A read or a rule of the plug-in that is wrong for a release shows
up here as a named difference, not as a test that happens to pass. Records are checked as
they arrive at a subscriber: encoded for the wire and decoded.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from stepview.engine.records.facts import RequestFacts, decode_facts, encode_facts
from stepview.engine.records.request_states import BY_NAME, CoreState
from stepview.engine.records.waiting_reasons import QueueView
from stepview.model.scheduling import WaitReason
from tests.conformance.rig import Rig


class Mismatch(AssertionError):
    """A record that says something other than the scheduler."""


class Checker:
    """The subscriber's view of ``rig``'s records, checked step by step."""

    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        self.view: dict[str, RequestFacts] = {}
        self.read = 0  # records applied so far
        self.steps = 0
        self.compared = 0  # request facts compared with the scheduler's
        self.finished: Counter[str] = Counter()
        self.ended: dict[str, list[int]] = {}  # id: output token counts it was ended with
        self.left: dict[str, int] = {}  # id: output tokens when it left the scheduler
        self.preemptions = 0
        self.intros: dict[str, list[int]] = {}  # id: prompt token ids, as introduced
        self.states_seen: set[CoreState] = set()
        self.unscheduled: dict[str, int] = {}  # id: steps it was running but not scheduled
        self.first_scheduled: dict[str, int] = {}  # id: the step it was first scheduled in

    def step(self, *, update: bool = True) -> Any:
        """One ``schedule()``, checked, then (``update``) its outputs; the scheduler output."""
        scheduler = self.rig.scheduler
        holding = dict(scheduler.requests)
        output = self.rig.schedule()
        self.steps += 1
        self._apply()
        self._compare(output)
        for req in scheduler.running:
            if req.request_id not in output.num_scheduled_tokens:
                self.unscheduled[req.request_id] = self.unscheduled.get(req.request_id, 0) + 1
        for request_id in output.num_scheduled_tokens:
            self.first_scheduled.setdefault(request_id, self.steps)
        if update:
            self.update(output, holding)
        return output

    def update(self, output: Any, holding: dict[str, Any] | None = None) -> None:
        """``update_from_output`` for ``output``; notes the requests it finished."""
        scheduler = self.rig.scheduler
        holding = dict(scheduler.requests) if holding is None else holding
        self.rig.update(output)
        self._note_left(holding)

    def abort(self, request_ids: list[str]) -> None:
        holding = dict(self.rig.scheduler.requests)
        self.rig.abort(request_ids)
        self._note_left(holding)

    def _note_left(self, holding: dict[str, Any]) -> None:
        now = self.rig.scheduler.requests
        for request_id, req in holding.items():
            if request_id not in now and request_id not in self.left:
                self.left[request_id] = req.num_output_tokens

    def _apply(self, *, made: bool = True) -> None:
        """Apply the records not read yet (``made``: schedule() must have made one)."""
        records = self.rig.records
        if made and len(records) == self.read:
            raise Mismatch(f"step {self.steps}: schedule() made no record")
        for sent in records[self.read :]:
            record = decode_facts(encode_facts(sent))  # as a subscriber gets it: on the wire
            if record.full:
                self.view = {}
            for facts in record.requests:
                self.view[facts.req_id] = facts
                if facts.intro is not None:
                    self.intros[facts.req_id] = facts.intro.prompt_token_ids
            for request_id in record.finished:
                self.finished[request_id] += 1
                self.view.pop(request_id, None)
            for end in record.ended:
                self.ended.setdefault(end.req_id, []).append(end.num_output_tokens)
            self.preemptions += len(record.preempted)
        self.read = len(records)

    def _compare(self, output: Any) -> None:
        scheduler = self.rig.scheduler
        record = self.rig.records[-1]
        where = f"step {self.steps}"
        _same(f"{where}: preempted", sorted(record.preempted), sorted(output.preempted_req_ids))
        # As a subscriber's view has it: a request the record does not name keeps the
        # figures of the last record that did (the plug-in names those scheduled before).
        scheduled = {rid: f.num_scheduled_tokens for rid, f in self.view.items()}
        wanted = dict(output.num_scheduled_tokens)
        _same(f"{where}: scheduled", {k: v for k, v in scheduled.items() if v}, wanted)
        _same(f"{where}: requests held", sorted(self.view), sorted(scheduler.requests))
        for request_id, req in scheduler.requests.items():
            self._compare_request(f"{where}: {request_id}", self.view[request_id], req)
        _same(f"{where}: running", record.num_running, len(scheduler.running))
        counts = scheduler.get_request_counts()
        _same(f"{where}: waiting", record.num_waiting, counts[1])
        pool = scheduler.kv_cache_manager.block_pool
        _same(f"{where}: free blocks", record.kv_free_blocks, pool.get_num_free_blocks())
        _same(f"{where}: paused", record.paused, int(scheduler.pause_state))
        queues = [scheduler.kv_holding_waiting, scheduler.waiting]
        queues += [getattr(scheduler, "async_kv_waiting", ())]  # 0.34 on
        queued = {r.request_id for queue in queues for r in queue}
        if record.waiting_head is not None and record.waiting_head not in queued:
            raise Mismatch(f"{where}: the scan stopped at {record.waiting_head}, in no queue")

    def _compare_request(self, where: str, facts: RequestFacts, req: Any) -> None:
        known = BY_NAME.get(req.status.name)  # the table of vLLM's states
        if known is None:
            raise Mismatch(f"{where}: vLLM status {req.status.name} not in stepview's table")
        state = known.code
        self.states_seen.add(state)
        blocks = sum(
            len(manager.req_to_blocks.get(req.request_id, ()))
            for manager in self.rig.scheduler.kv_cache_manager.coordinator.single_type_managers
        )
        _same(f"{where}: state", CoreState(facts.state), state)
        _same(f"{where}: prompt tokens", facts.num_prompt_tokens, req.num_prompt_tokens)
        _same(f"{where}: computed tokens", facts.num_computed_tokens, req.num_computed_tokens)
        _same(f"{where}: output tokens", facts.num_output_tokens, req.num_output_tokens)
        _same(f"{where}: preemptions", facts.num_preemptions, req.num_preemptions)
        _same(f"{where}: KV blocks", facts.num_kv_blocks, blocks)
        _same(f"{where}: set aside", facts.deferred, req in self.rig.scheduler.deferred_waiting)
        prompt = [int(t) for t in req.prompt_token_ids]  # 0.34: an int32 array subclass
        _same(f"{where}: prompt as introduced", self.intros.get(req.request_id), prompt)
        self.compared += 1

    def reasons(self) -> dict[str, WaitReason | None]:
        """Why each waiting request of the subscriber's view was not scheduled in the last
        step, by the waiting-reason rules (its own reason, else the one its queue shares)."""
        queue = QueueView(self.rig.records[-1])
        return {
            request_id: queue.own(facts) or queue.shared
            for request_id, facts in self.view.items()
            if facts.state != CoreState.RUNNING and not facts.num_scheduled_tokens
        }

    def finish(self) -> dict[str, Any]:
        """After the last step: every request left once and ended once; the figures."""
        self._apply(made=False)  # the idle record of a scheduler that emptied
        _same("requests held at the end", sorted(self.view), sorted(self.rig.scheduler.requests))
        _same("requests left, in records", sorted(self.finished), sorted(self.left))
        twice = sorted(r for r, n in self.finished.items() if n > 1)
        _same("requests in two records' finished", twice, [])
        _same("how requests ended", self.ended, {r: [n] for r, n in self.left.items()})
        return {
            "steps": self.steps,
            "records": self.read,
            "requests compared": self.compared,
            "preemptions": self.preemptions,
            "states": sorted(s.name for s in self.states_seen),
            "unscheduled while running": sum(self.unscheduled.values()),
        }


def _same(what: str, got: Any, expected: Any) -> None:
    if got != expected:
        raise Mismatch(f"{what}: the record says {got!r}, vLLM's scheduler {expected!r}")
