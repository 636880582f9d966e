"""What the plug-in records after each ``schedule()``: :class:`CoreCapture`.

Runs inside vLLM's engine core, on its scheduling thread, on every step of someone's server:
whatever it does per step is serving time lost, so it does nothing while nobody listens, never
raises into vLLM (a failure switches it off, once, with a log line), and does work in
proportion to what the step changed, never to how many requests the core holds: a server in
trouble holds thousands of waiting requests, and that is when people watch it.

Which requests a record names (see :mod:`stepview.engine.records.facts`) is known from vLLM's
own events, without looking at the others: those that arrived (``add_request``), those
scheduled in this step or the one before (tokens computed, outputs appended, KV blocks
taken), those preempted, those vLLM set aside or un-set-aside (``deferred_waiting``, a set),
and those in a blocked waiting status (their status can change with no event we see). The
queue is one id, where vLLM's scan stopped, found from the front of the queue in O(1)
(:mod:`~stepview.engine.plugin.waiting_head`); :mod:`~stepview.engine.plugin.naming` keeps
track of all that. Only the first record after someone (re)subscribes lists every request, in
parts over a few steps when the core holds many (a watch joins a server in trouble: built in
one step, that record was the step's delay). Each ending also goes to the publisher's log of ends
(:mod:`~stepview.engine.plugin.end_log`), for a watch that loses records: while someone
listens, and for a linger after the last one left (ends only: no record is built then).

An idle core calls no hook: the plug-in's stack watch (:mod:`~stepview.engine.plugin.stacks`)
takes the scheduling thread's part then, twice a second (:meth:`CoreCapture.while_idle`). The
capture's state is used under :attr:`CoreCapture.lock` by both (an uncontended lock: ~0.2 us
a hook, on the scheduling thread).

Apart from the scheduler class (:mod:`~stepview.engine.plugin.scheduler`) so that its rules
run over a fake scheduler in tests.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from stepview.engine.plugin import statuses
from stepview.engine.plugin import vllm_versions as versions
from stepview.engine.plugin.end_log import EndLog, ended_request
from stepview.engine.plugin.intro import intro_of
from stepview.engine.plugin.naming import Naming, part_size
from stepview.engine.plugin.times import CoreTimes, wall_offset
from stepview.engine.plugin.waiting_head import WaitingScan
from stepview.engine.records.channel import FactsSink
from stepview.engine.records.facts import EndedFacts, RequestFacts, StepFacts
from stepview.engine.records.request_states import CoreState

log = logging.getLogger("stepview.engine.plugin")

_OTHER = int(CoreState.OTHER)
_NO_TOKENS: list[int] = []  # shared by every record that has no new token (never mutated)


class CoreCapture:
    """Builds the records from a scheduler's state and hands them to the sink (apart from the
    scheduler class so the rules run on a fake scheduler in tests). Cost is the point: one
    struct per request that changed, nothing while nobody listens (module docstring)."""

    def __init__(self, scheduler: Any) -> None:
        self.sink: FactsSink | None = None  # set by the owner once the capture works
        # Held by the scheduler's hooks, and by the stack watch while the core idles. Re-entrant:
        # vLLM's update_from_output and add_request call finish_requests, a hook too.
        self.lock = threading.RLock()
        self.failure: str | None = None
        self.step = 0
        self.iteration = 0
        self.seq = 0  # records built
        self.started = time.time()
        self._cached: dict[str, int] = {}  # prefix-cache hits: vLLM drops them at 1st token
        self._reported: set[str] = set()  # finished ids already sent in an idle record
        # Output tokens already sent, by request: records carry only the rest (and a request
        # absent here gets its intro). Cleared when someone (re)subscribes.
        self._sent: dict[str, int] = {}
        self._ended: list[EndedFacts] = []  # how requests ended, for the next record
        # Requests held when a full record in parts began that ended before their part, as
        # that part would have named them (the watch sees every request it was due).
        self._unnamed: list[RequestFacts] = []
        self._log: EndLog | None = None  # the publisher's log of ends (catching watches up)
        self._times = CoreTimes()  # vLLM's scheduled / first-token times (tails only)
        self._listening = False  # the last schedule() built a record
        self._full = True  # the next record lists every request (nothing was sent before)
        self._naming = Naming(part_size())  # which requests the next record names
        self._tails = False  # records carry output tokens, intros and ends (a remote client)
        self._groups: list[Mapping[str, list[Any]]] = []
        # StepFacts' fields after the scheduler's settings, read once (chunked prefill ...)
        self._settings: dict[str, Any] = {}
        self._scan: WaitingScan  # where the scan of the waiting queues ended (set when on)
        self._held = False  # this step held prefills (prefill_schedule_interval)
        self._model = ""  # the served model's name, sent in full records
        self.rank = 0
        try:
            versions.check_scheduler(scheduler)
            parallel = scheduler.parallel_config
            rank = getattr(parallel, "data_parallel_index", None)
            self.rank = int(getattr(parallel, "data_parallel_rank", 0) if rank is None else rank)
            manager = scheduler.kv_cache_manager
            self._pool = manager.block_pool
            # req_to_blocks of each KV cache group (defaultdicts: only ever .get() them).
            self._groups = [m.req_to_blocks for m in manager.coordinator.single_type_managers]
            config, lora = scheduler.scheduler_config, scheduler.lora_config
            cap, loras = config.long_prefill_token_threshold, lora.max_loras if lora else 0
            priority = scheduler.policy.value == "priority"
            chunked = bool(config.enable_chunked_prefill)
            self._settings = versions.settings(config, chunked, cap, loras, priority)
            self._scan = WaitingScan(scheduler, versions.RULES)
        except Exception as exc:  # another vLLM: vLLM runs on, without the plug-in
            self._switch_off(exc)
        # Only a name to show: where a vLLM keeps it elsewhere, the records go without it.
        models = getattr(getattr(scheduler, "vllm_config", None), "model_config", None)
        self._model = str(getattr(models, "served_model_name", None) or "")

    def arrived(self, request_id: str) -> None:
        """``add_request`` took a request: the next record names it (O(1))."""
        if self._listening:
            self._naming.arrived.append(request_id)

    def before_schedule(self, scheduler: Any, throttle: bool) -> None:
        """Whether the coming ``schedule()`` holds prefills (read before: it moves the cadence).

        Only while someone listens: a server nobody watches pays nothing here (the first
        record after a subscriber joins says no prefill was held)."""
        if self._listening:
            try:
                self._held = versions.prefills_held(scheduler, throttle)
            except Exception as exc:  # never into vLLM
                self._switch_off(exc)

    def after_schedule(self, scheduler: Any, output: Any) -> None:
        """One record per ``schedule()`` that had anything to schedule or report."""
        try:
            reported, self._reported = self._reported, set()
            total = output.total_num_scheduled_tokens
            if total == 0 and not any(scheduler.get_request_counts()):
                return  # the bookkeeping step that passes finished ids to the workers
            self.step += 1
            if total:
                self.iteration += 1
            sink = self.sink
            if sink is None or not sink.wanted():
                if self._listening:
                    self._stop_listening()
                return
            self._listening = True
            finished = sorted(i for i in output.finished_req_ids if i not in reported)
            preempted = sorted(output.preempted_req_ids)
            sink.deliver(
                self.capture(scheduler, output.num_scheduled_tokens, finished, preempted, False)
            )
        except Exception as exc:  # never into vLLM
            self._switch_off(exc)

    def _stop_listening(self) -> None:
        """Nobody listens any more: forget what was sent; whoever comes next gets it all."""
        self._listening = False
        self._full = True
        self._ended.clear()
        self._unnamed.clear()
        self._sent.clear()
        self._cached.clear()
        self._times.clear()
        self._naming.clear()

    def before_update(self, scheduler: Any, output: Any) -> dict[str, Any] | None:
        """The requests ``update_from_output`` may finish, before it runs, when records say
        how requests end.

        vLLM frees a request in the update that finishes it: only a reference taken before
        still holds it, with its last tokens and its finish reason. The update finishes only
        requests it has output for, those of ``output`` (the step's scheduled ones); those it
        fails go through ``finish_requests`` (:meth:`after_abort`).
        """
        if not (self._tails and (self._listening or self._logging())):
            return None
        try:
            requests = scheduler.requests
            return {rid: requests[rid] for rid in output.num_scheduled_tokens if rid in requests}
        except Exception as exc:  # never into vLLM
            self._switch_off(exc)
            return None

    def after_update(
        self, scheduler: Any, before: dict[str, Any] | None, output: Any, made: Any
    ) -> None:
        """After ``update_from_output(output)`` made ``made``: first tokens' times, how the
        requests it finished ended, then the idle record."""
        if before is not None:
            try:
                self._times.outputs_made(output.num_scheduled_tokens, made)
                requests = scheduler.requests
                ended = [
                    rid
                    for rid in scheduler.finished_req_ids
                    if rid in before and rid not in requests
                ]  # O(what finished), not O(what was scheduled)
                if len(ended) > 1:  # the step's scheduling order, not the set's (which differs
                    order = {rid: i for i, rid in enumerate(before)}  # between runs)
                    ended.sort(key=order.__getitem__)
                for request_id in ended:
                    self._end(before[request_id])
            except Exception as exc:  # never into vLLM
                self._switch_off(exc)
        self.after_finish(scheduler)

    def after_abort(self, scheduler: Any, aborted: Any) -> None:
        """After ``finish_requests`` (aborts): how they ended, then the idle record."""
        if self._tails and (self._listening or self._logging()):
            try:
                for req in aborted or ():
                    self._end(req)
            except Exception as exc:  # never into vLLM
                self._switch_off(exc)
        self.after_finish(scheduler)

    def _logging(self) -> bool:
        """Ends are logged though no record is built: the link of the last watch dropped
        less than the linger ago (:mod:`~stepview.engine.plugin.end_log`)."""
        log = self._log
        return log is not None and log.open and self.sink is not None

    def _end(self, req: Any) -> None:
        """Keep how ``req`` ended (its tokens, its finish reason) for the next record, and
        in the log of ends, tagged with that record's seq."""
        request_id = req.request_id
        unnamed = self._naming.owes(request_id, self._sent)
        self._sent.pop(request_id, None)
        times = self._times
        log = self._log
        made = times.of(request_id) if log is not None or unnamed else (0.0, 0.0)
        first_at = times.forget(request_id)
        reason = req.get_finished_reason()
        stop = req.stop_reason
        ended = EndedFacts(
            request_id,
            req.num_output_tokens,
            list(req.output_token_ids),
            "abort" if reason is None else str(reason),
            stop if isinstance(stop, str | int) else None,
            first_at,
        )
        cached = self._cached.get(request_id, 0)
        if self._listening:
            self._ended.append(ended)
            if unnamed:
                self._unnamed.append(ended_request(req, ended, cached, made))
        if log is not None and log.open:
            log.add(self.seq + 1, req, ended, self.started, time.time(), cached, made)

    def after_finish(self, scheduler: Any) -> None:
        """After outputs or aborts: the idle record, when the scheduler has just emptied."""
        try:
            sink = self.sink
            if sink is None or any(scheduler.get_request_counts()):
                return
            finished = sorted(i for i in scheduler.finished_req_ids if i not in self._reported)
            if finished and sink.wanted():
                self._reported.update(finished)
                sink.deliver(self.capture(scheduler, {}, finished, [], True))
        except Exception as exc:  # never into vLLM
            self._switch_off(exc)

    def while_idle(self, scheduler: Any) -> None:
        """The scheduling thread's part while the core holds no request (the stack watch's
        thread, twice a second; see :meth:`FactsPublisher.idle_turn
        <stepview.engine.plugin.publisher.FactsPublisher.idle_turn>`): an idle core calls no
        hook, and a watch that lost the last records, or one that just subscribed, would
        otherwise hear nothing until the next request."""
        turn = getattr(self.sink, "idle_turn", None)  # a publisher's; a listener loses nothing
        if turn is None:
            return
        with self.lock:
            try:
                if self.sink is None or any(scheduler.get_request_counts()):
                    return  # a request came meanwhile: its step does all this
                turn(lambda: self._idle_record(scheduler))
            except Exception as exc:  # never into vLLM
                self._switch_off(exc)

    def _idle_record(self, scheduler: Any) -> StepFacts:
        """A record of the idle core for a (re)subscriber: it holds nothing; whoever listens
        from now on is told of every request that comes."""
        self._listening = True
        return self.capture(scheduler, {}, [], [], True)

    def _switch_off(self, exc: Exception) -> None:
        """Stop capturing for good and say so once: vLLM keeps running as if unplugged."""
        self.failure = versions.failure_text(exc)
        sink, self.sink = self.sink, None
        log.error("stepview: scheduler plug-in switched off (%s); vLLM runs on", self.failure)
        versions.announce_off(sink, self.failure, self.started, self.rank)

    def capture(
        self,
        scheduler: Any,
        scheduled: Mapping[str, int],
        finished: list[str],
        preempted: list[str],
        idle: bool,
    ) -> StepFacts:
        """The record of what changed in the scheduler since the last one (after ``schedule()``)."""
        cached = self._cached
        sent = self._sent
        sink = self.sink
        full = self._full
        fresh = False
        if sink is not None:
            self._tails = sink.tails
            if sink.fresh:  # someone (re)subscribed: everything, from the start
                sink.fresh = False
                full = fresh = True
        if full:
            sent.clear()
            self._full = False
            self._log = log = getattr(sink, "end_log", None)  # a publisher's; not a listener's
            if log is not None:
                log.core_started = self.started
        tails = self._tails
        times = self._times
        for request_id in finished:
            cached.pop(request_id, None)
            sent.pop(request_id, None)
            times.forget(request_id)
        if tails:
            times.offset = wall_offset()
        first = times.first
        requests = scheduler.requests
        deferred = scheduler.deferred_waiting
        # Every request, or those whose facts may have changed and a full record's next part.
        naming = self._naming
        named = naming.named(requests, scheduled, preempted, first, deferred, full, fresh, sent)
        later = naming.later
        blocked: set[str] = set()
        sent_get = sent.get
        no_tokens = _NO_TOKENS
        groups = self._groups
        single = groups[0] if len(groups) == 1 else None
        vllm = statuses.VLLM  # vLLM's statuses, by the table (looked up at import)
        state_of, set_aside, unknown = vllm.code_of, vllm.set_aside, vllm.unknown
        last_unfinished = vllm.last_unfinished
        facts: list[RequestFacts] = []
        prefill = decode = 0
        # One pass: every request this step scheduled is named, so its tokens are counted as
        # prefill or decode here too (a second pass fetched each of them again).
        for request_id in named:
            req = requests.get(request_id)
            if req is None:
                continue
            status = req.status
            outputs: int = req.num_output_tokens
            computed: int = req.num_computed_tokens
            prompt: int = req.num_prompt_tokens
            now_scheduled: int = scheduled.get(request_id, 0)
            if now_scheduled:
                # Decode: only the newest token was left to compute (with async scheduling,
                # placeholders put computed ahead of the tokens known so far).
                if outputs and computed - now_scheduled >= prompt + outputs - 1:
                    decode += now_scheduled
                else:
                    prefill += now_scheduled
            if status > last_unfinished:  # finished, its blocks not freed yet
                continue
            unknown_name = ""
            if status in set_aside:  # blocked, or a status the table does not know (said)
                blocked.add(request_id)
                unknown_name = unknown.get(status, "")
            stats = req.prefill_stats
            if stats is not None:
                hit: int = stats.num_cached_tokens
                if hit:
                    cached[request_id] = hit
            else:
                hit = cached.get(request_id, 0)
            if single is not None:
                blocks = len(single.get(request_id, ()))
            else:
                blocks = sum(len(g.get(request_id, ())) for g in groups)
            lora = req.lora_request
            intro = None
            new_tokens = no_tokens
            scheduled_at = first_at = 0.0
            if tails:
                events = req.events  # vLLM's, held from its arrival to its first output
                if events:
                    scheduled_at = times.scheduled_at(events)
                if not outputs:
                    if now_scheduled:
                        times.unstamped[request_id] = (req, scheduled_at)
                elif first:
                    first_at = first.pop(request_id, 0.0)
                had = sent_get(request_id, -1)
                if had < 0 and request_id not in later:  # (a full record's part: budgeted)
                    intro = intro_of(req)
                    had = 0
                    sent[request_id] = 0
                if outputs > had >= 0:
                    new_tokens = req.output_token_ids[had:]
                    sent[request_id] = outputs
            facts.append(
                RequestFacts(
                    request_id,
                    state_of.get(status, _OTHER),
                    prompt,
                    computed,
                    outputs,
                    req.num_preemptions,
                    now_scheduled,
                    blocks,
                    hit,
                    req.arrival_time,
                    req.priority,
                    req.max_tokens,
                    req in deferred,
                    new_tokens,
                    intro,
                    lora.lora_int_id if lora is not None else 0,
                    scheduled_at,
                    first_at,
                    unknown_name,
                )
            )
        naming.blocked = blocked
        if self._unnamed:
            facts.extend(self._unnamed)
            self._unnamed.clear()
        self.seq += 1
        pool = self._pool
        running, waiting = scheduler.get_request_counts()
        return StepFacts(
            self.step,
            self.iteration,
            time.time(),
            self.started,
            self.rank,
            self.seq,
            full,
            scheduler.max_num_scheduled_tokens,
            prefill,
            decode,
            scheduler.max_num_running_reqs,
            running + scheduler.num_waiting_for_streaming_input,
            waiting,
            pool.get_num_free_blocks(),
            pool.num_gpu_blocks - 1,  # block 0 is vLLM's null block, never handed out
            scheduler.block_size,
            preempted,
            finished,
            facts,
            idle,
            self._take_ended(),
            prefills_held=self._held,
            model=self._model if full else "",
            to_come=naming.to_come(idle),
            **self._settings,
            **self._scan.fields(scheduler, deferred),
        )

    def _take_ended(self) -> list[EndedFacts]:
        """The endings kept since the last record, handed over whole: always a swap. The
        record keeps this list, and a publisher that sends records in batches serializes it
        after later updates; an empty one kept here would have been appended to, and the
        same ending gone out in two records."""
        ended, self._ended = self._ended, []
        return ended

    def close(self) -> None:
        sink, self.sink = self.sink, None
        if sink is not None:
            sink.close()
