"""``stepview --attach``: a running vLLM server, watched through its engine cores' records.

A server started with stepview's scheduler plug-in (``--scheduler-cls
stepview.engine.scheduler_plugin.StepviewScheduler`` and ``STEPVIEW_PUBLISH=ADDRESS``)
publishes one :class:`~stepview.model.core_facts.StepFacts` per engine-core step.
:class:`AttachedEngine` subscribes to them and implements the driver's
:class:`~stepview.model.engine_api.WatchedEngine` protocol, so the same driver and ledger
as a live run give the same panes, detail view, history, ``--record`` and results file. It
imports no vLLM (attaching works from a laptop, through an ssh tunnel): only zmq, msgspec
and, for ``--api``, the standard library.

How a record becomes a step (one record per ``step()``, oldest first):

* every engine-core request (one per sample) is known by its core id; the first time one is
  seen it is **adopted**: its stepview id is the client's id read from the core id
  (:func:`~stepview.model.core_facts.split_internal_id`), suffixed ``@RANK`` when several
  ranks are watched; a request stepview itself sent through ``--api`` keeps stepview's id.
  The record's intro gives its prompt token ids and sampling parameters; the prompt text is
  not on the wire (``(N prompt tokens)``);
* states, prefill progress and preemptions come from the record as for stepview's own
  engine (:class:`~stepview.engine.scheduler_view.SchedulerView`); output token ids arrive
  as the tail the record carries; the figures are the record's (queue sizes, KV blocks, the
  tokens scheduled for prefill and decode);
* a request that is no longer in its rank's record (each record is complete) has **left**
  the engine: it ends FINISHED with finish reason ``left the engine`` (vLLM's own reason is
  not in the record). One stepview sent waits for its HTTP answer instead, which carries the
  text and the real finish reason.

The link: while a rank's connection is lost (server killed, network down) the view is held
as it was, requests included, and the state is DISCONNECTED. When it is back, the server's
next record settles them: still there, they go on; gone, they left; an engine core that
restarted (another ``core_started``) means they were lost: ABORTED, ``server lost``. A
server that comes back with nothing in flight sends no record at all, so after
:data:`SETTLE_S` of silence the held requests end the same way. stepview quitting only
closes its sockets: the server never notices.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from stepview.engine.facts_channel import ChannelState, FactsSubscriber, rank_address
from stepview.engine.scheduler_view import SchedulerView
from stepview.engine.server_api import ApiAnswer, ApiError, ServedModel, ServerApi
from stepview.model.core_facts import CoreState, RequestFacts, StepFacts, split_internal_id
from stepview.model.engine_api import (
    ArrivedRequest,
    CompletionUpdate,
    EndedRequest,
    EngineRejected,
    LinkState,
    OutputUpdate,
    SchedulerEntry,
    StepResult,
)
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import (
    EngineCounters,
    EngineInfo,
    EngineState,
    RankStatus,
    RequestState,
)

log = logging.getLogger(__name__)

LEFT = "left the engine"
RESTARTED = "server lost: its engine core restarted"
SILENT = "lost while disconnected: gone when the server came back"
# Records kept while the view is held (paused) or behind; older ones are dropped (the
# records are complete, so the next one read puts every request right again).
MAX_BACKLOG = 512
# After a lost connection comes back, how long held requests wait for a record.
SETTLE_S = 2.0
# A request whose intro (prompt ids, sampling) was missed waits this long for a resent one.
INTRO_WAIT_S = 1.0
# At most one resync request per rank this often.
RESYNC_EVERY_S = 1.0
# How often the server's API is asked what it serves, until it answers.
MODEL_RETRY_S = 2.0
_RUNNING = int(CoreState.RUNNING)
_NO_ANSWERS: list[ApiAnswer] = []


@dataclass(slots=True)
class _Sample:
    """One engine-core request: one sample of a stepview request."""

    request_id: str  # stepview's id (all samples of a request share it)
    index: int
    tokens: list[int] = field(default_factory=list)
    counted: bool = False  # its prompt is in the prefix-cache figures


class _Rank:
    """One engine core (data-parallel rank): its subscriber, requests and latest figures."""

    def __init__(self, rank: int, address: str) -> None:
        self.rank = rank
        self.address = address
        self.subscriber = FactsSubscriber(address)
        self.core_started: float | None = None
        self.samples: dict[str, _Sample] = {}  # core id -> sample
        self.unintroduced: dict[str, float] = {}  # core id -> when first seen without intro
        self.view = SchedulerView(self._lookup)
        self.connects = 0  # the subscriber's connect count as last seen
        self.settle_at: float | None = None  # reconnected with requests held: settle by then
        self.last_step: int | None = None
        self.last_time = 0.0
        self.next_resync = 0.0
        self.status = RankStatus(rank, False)
        self.kv_used = 0
        self.kv_total = 0
        self.busy = False
        self.prefix_queries = 0
        self.prefix_hits = 0

    def _lookup(self, core_id: str) -> str | None:
        sample = self.samples.get(core_id)
        return None if sample is None else sample.request_id

    def forget_core(self) -> list[str]:
        """Drop every request of the engine core that was here; their stepview ids."""
        ids = list(dict.fromkeys(s.request_id for s in self.samples.values()))
        self.samples.clear()
        self.unintroduced.clear()
        self.view = SchedulerView(self._lookup)
        self.busy = False
        return ids


class AttachedEngine:
    """A vLLM server stepview watches (see the module docstring); all calls on one thread.

    ``address`` is the plug-in's ``STEPVIEW_PUBLISH`` address; ``ranks`` the data-parallel
    ranks to watch (each on :func:`~stepview.engine.facts_channel.rank_address`). ``api``
    adds prompts through the server's completions endpoint; without it adding is refused.
    """

    def __init__(
        self,
        address: str,
        ranks: Sequence[int] = (0,),
        *,
        api: ServerApi | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.address = address
        self._clock = clock
        self._api = api
        self._ranks: list[_Rank] = []
        try:
            for rank in ranks:
                self._ranks.append(_Rank(rank, rank_address(address, rank)))
        except BaseException:
            self.shutdown()
            raise
        self._labelled = len(self._ranks) > 1
        self._backlog: deque[tuple[_Rank, StepFacts]] = deque()
        self._ended: list[EndedRequest] = []  # settled outside a record
        self._answers: list[ApiAnswer] = []  # API answers not reported yet
        self._own: dict[str, str] = {}  # the server's client id -> stepview id (sent via API)
        self._awaiting: set[str] = set()  # stepview ids sent via the API, no answer yet
        self._info = EngineInfo(model=f"vLLM server at {address}", attached=address)
        self._served: ServedModel | None = None  # the API's answer, handed over once
        self._closed = threading.Event()
        if api is not None:
            threading.Thread(
                target=self._look_up_model, args=(api,), name="stepview-api-model", daemon=True
            ).start()

    # -- Engine protocol ------------------------------------------------------------------

    @property
    def info(self) -> EngineInfo:
        return self._info

    def describe_server(self, name: str, max_model_len: int, vllm_version: str) -> None:
        """What the server's API said about it (model name, context length, vLLM version)."""
        self._info = replace(
            self._info,
            model=f"{name} @ {self.address}",
            max_model_len=max_model_len or self._info.max_model_len,
            vllm_version=vllm_version or self._info.vllm_version,
        )

    def add_request(self, request_id: str, prompt: str, spec: SamplingSpec) -> None:
        api = self._api
        if api is None:
            raise EngineRejected("attached without --api: stepview cannot add requests")
        self._own[api_client_id(api.server_id(request_id))] = request_id
        self._awaiting.add(request_id)
        api.submit(request_id, prompt, spec)

    def abort(self, request_ids: list[str]) -> None:
        api = self._api
        for request_id in request_ids:
            if request_id in self._awaiting and api is not None and api.abort(request_id):
                continue
            raise EngineRejected(
                "stepview cannot abort this request: it did not send it, and the server's "
                "API has no abort for other clients' requests"
            )

    def has_unfinished(self) -> bool:
        """True when a step is ready to report (a record, an API answer, a settled request)."""
        self._receive()
        return bool(self._backlog or self._answers or self._ended)

    def step(self) -> StepResult:
        self._receive()
        outputs: list[OutputUpdate] = []
        arrived: list[ArrivedRequest] = []
        ended, self._ended = self._ended, []
        answers, self._answers = self._answers, _NO_ANSWERS
        scheduled: dict[str, SchedulerEntry] = {}
        interval: float | None = None
        per_step = (0, 0, 0)
        if self._served is not None:
            served, self._served = self._served, None
            self.describe_server(served.name, served.max_model_len, served.vllm_version)
        if self._backlog:
            rank, facts = self._backlog.popleft()
            scheduled, per_step, interval = self._read(rank, facts, outputs, arrived, ended)
        for answer in answers:
            self._answered(answer, outputs, ended)
        return StepResult(
            outputs=tuple(outputs),
            scheduled=scheduled,
            counters=self._counters(*per_step),
            arrived=tuple(arrived),
            ended=tuple(ended),
            interval=interval,
        )

    def link(self) -> LinkState:
        ranks = tuple(rank.status for rank in self._ranks) if self._labelled else ()
        statuses = [rank.subscriber.state for rank in self._ranks]
        if all(s is ChannelState.CONNECTING for s in statuses):
            return LinkState(
                EngineState.STARTING,
                f"waiting for the server's records at {self.address} (started with "
                f"STEPVIEW_PUBLISH={self.address} and stepview's --scheduler-cls?)",
                ranks,
            )
        lost = [
            r for r, s in zip(self._ranks, statuses, strict=True) if s is not ChannelState.CONNECTED
        ]
        if lost:
            where = ", ".join(
                r.address if not self._labelled else f"rank {r.rank} at {r.address}" for r in lost
            )
            held = sum(len(r.samples) for r in lost)
            also = f"; {held} held as they were" if held else ""
            return LinkState(
                EngineState.DISCONNECTED, f"DISCONNECTED from {where} — reconnecting{also}", ranks
            )
        busy = any(rank.busy for rank in self._ranks)
        return LinkState(EngineState.RUNNING if busy else EngineState.IDLE, "", ranks)

    def _look_up_model(self, api: ServerApi) -> None:
        """Ask the API what it serves, until it answers (the server may not be up yet)."""
        while not self._closed.is_set():
            try:
                self._served = api.model()
                return
            except ApiError as exc:
                log.info("stepview: %s/v1/models: %s; asking again", api.base_url, exc)
            self._closed.wait(MODEL_RETRY_S)

    def shutdown(self) -> None:
        """Close the sockets; the server is left alone (so are requests sent through the API)."""
        self._closed.set()
        for rank in self._ranks:
            rank.subscriber.close()
        self._ranks = []
        self._backlog.clear()

    # -- receiving ------------------------------------------------------------------------

    def _receive(self) -> None:
        """Read every rank's new records into the backlog; notice reconnects and silence."""
        now = self._clock()
        backlog = self._backlog
        for rank in self._ranks:
            subscriber = rank.subscriber
            records = subscriber.poll()
            if subscriber.connects != rank.connects:
                rank.connects = subscriber.connects
                if rank.samples and rank.core_started is not None:
                    rank.settle_at = now + SETTLE_S  # back: the next record settles them
            connected = subscriber.state is ChannelState.CONNECTED
            if connected != rank.status.connected:
                rank.status = rank.status._replace(connected=connected)
            if records:
                rank.settle_at = None
                backlog.extend((rank, facts) for facts in records)
            elif rank.settle_at is not None and now >= rank.settle_at and connected:
                rank.settle_at = None
                self._lost(rank, SILENT)
        if self._api is not None:
            answers = self._api.answers()
            if answers:
                self._answers = [*self._answers, *answers]
        excess = len(backlog) - MAX_BACKLOG
        if excess > 0:
            for _ in range(excess):
                backlog.popleft()
            log.info("stepview: %d records dropped (the view was held or behind)", excess)

    def _lost(self, rank: _Rank, why: str) -> None:
        """Every request held for ``rank`` is gone with its engine core."""
        for request_id in rank.forget_core():
            self._ended.append(EndedRequest(request_id, RequestState.ABORTED, why))
            self._awaiting.discard(request_id)

    def _resync(self, rank: _Rank, now: float) -> None:
        """Ask ``rank`` for a fresh record (a token tail or an intro was missed)."""
        if now >= rank.next_resync:
            rank.next_resync = now + RESYNC_EVERY_S
            rank.subscriber.resync()

    # -- one record -----------------------------------------------------------------------

    def _read(
        self,
        rank: _Rank,
        facts: StepFacts,
        outputs: list[OutputUpdate],
        arrived: list[ArrivedRequest],
        ended: list[EndedRequest],
    ) -> tuple[dict[str, SchedulerEntry], tuple[int, int, int], float | None]:
        """Fold one record into ``rank``: the scheduler entries, step figures and interval."""
        if rank.core_started != facts.core_started:
            if rank.core_started is not None:
                for request_id in rank.forget_core():
                    ended.append(EndedRequest(request_id, RequestState.ABORTED, RESTARTED))
                    self._awaiting.discard(request_id)
                rank.last_step = None
            rank.core_started = facts.core_started
        now = self._clock()
        samples = rank.samples
        new_ids: dict[str, tuple[RequestFacts, int]] = {}  # stepview id -> (facts, samples)
        known = generated = 0
        for req in facts.requests:
            sample = samples.get(req.req_id)
            if sample is None:
                sample = self._adopt(rank, req, now, new_ids)
                if sample is None:
                    continue
            else:
                known += 1
            if req.new_token_ids:
                generated += self._take_tokens(rank, sample, req, outputs, now)
        if known < len(samples) - len(new_ids) or rank.unintroduced:
            self._leave(rank, {req.req_id for req in facts.requests}, ended)
        for request_id, (req, count) in new_ids.items():
            arrived.append(_arrival(request_id, req, count, facts.time))
        scheduled = rank.view.read(facts)
        self._figures(rank, facts)
        interval = None
        if rank.last_step is not None and facts.step > rank.last_step:
            interval = (facts.time - rank.last_time) / (facts.step - rank.last_step)
        rank.last_step, rank.last_time = facts.step, facts.time
        info = self._info
        if info.max_num_seqs != facts.max_num_running_reqs * len(self._ranks):
            self._info = replace(info, max_num_seqs=facts.max_num_running_reqs * len(self._ranks))
        per_step = (facts.prefill_tokens, generated, rank.view.new_preemptions)
        return scheduled, per_step, interval

    def _adopt(
        self,
        rank: _Rank,
        req: RequestFacts,
        now: float,
        new_ids: dict[str, tuple[RequestFacts, int]],
    ) -> _Sample | None:
        """A sample seen for the first time; ``None`` while its intro is awaited."""
        core_id = req.req_id
        if req.intro is None:
            first = rank.unintroduced.setdefault(core_id, now)
            if now - first < INTRO_WAIT_S:
                self._resync(rank, now)
                return None
        rank.unintroduced.pop(core_id, None)
        client_id, index = split_internal_id(core_id)
        own = self._own.get(client_id)
        if own is not None:
            request_id = own
        else:
            request_id = f"{client_id}@{rank.rank}" if self._labelled else client_id
            seen = new_ids.get(request_id)
            new_ids[request_id] = (seen[0] if seen else req, (seen[1] if seen else 0) + 1)
        sample = rank.samples[core_id] = _Sample(request_id, index or 0)
        return sample

    def _take_tokens(
        self,
        rank: _Rank,
        sample: _Sample,
        req: RequestFacts,
        outputs: list[OutputUpdate],
        now: float,
    ) -> int:
        """Append the record's token tail to the sample (how many were new); a gap in the
        tail asks for a fresh record."""
        new = req.new_token_ids
        tokens = sample.tokens
        start = req.num_output_tokens - len(new)
        have = len(tokens)
        if start > have:
            self._resync(rank, now)
            return 0
        if start + len(new) <= have:
            return 0
        tokens.extend(new[have - start :])
        completion = CompletionUpdate(sample.index, "", tokens, None, None, None, None)
        outputs.append(OutputUpdate(sample.request_id, None, None, (completion,), False))
        return start + len(new) - have

    def _leave(self, rank: _Rank, present: set[str], ended: list[EndedRequest]) -> None:
        """Samples gone from ``rank``'s (complete) record; requests with none left end."""
        samples = rank.samples
        unintroduced = rank.unintroduced
        for core_id in [c for c in unintroduced if c not in present]:
            del unintroduced[core_id]
        gone = [core_id for core_id in samples if core_id not in present]
        if not gone:
            return
        left = {samples.pop(core_id).request_id for core_id in gone}
        for sample in samples.values():
            left.discard(sample.request_id)
        for request_id in left:
            if request_id not in self._awaiting:  # stepview's own wait for their answer
                ended.append(EndedRequest(request_id, RequestState.FINISHED, LEFT))

    def _answered(
        self, answer: ApiAnswer, outputs: list[OutputUpdate], ended: list[EndedRequest]
    ) -> None:
        """The HTTP answer to a request stepview sent: its final output, or why it failed."""
        self._awaiting.discard(answer.request_id)
        if answer.state is RequestState.FINISHED:
            prompt = answer.prompt_token_ids or None
            outputs.extend(
                OutputUpdate(answer.request_id, prompt, None, (c,), True)
                for c in answer.completions
            )
            if not answer.completions:
                ended.append(EndedRequest(answer.request_id, RequestState.FINISHED, LEFT))
        else:
            ended.append(EndedRequest(answer.request_id, answer.state, answer.error or ""))

    # -- figures --------------------------------------------------------------------------

    def _figures(self, rank: _Rank, facts: StepFacts) -> None:
        """The rank's queue sizes, KV cache and prefix-cache counts after ``facts``."""
        running = 0
        for req in facts.requests:
            if req.state == _RUNNING:
                running += 1
                sample = rank.samples.get(req.req_id)
                if sample is not None and not sample.counted and req.num_computed_tokens:
                    sample.counted = True
                    rank.prefix_queries += req.num_prompt_tokens
                    rank.prefix_hits += req.num_cached_tokens
        total = facts.kv_total_blocks
        rank.kv_total = total
        rank.kv_used = max(0, total - facts.kv_free_blocks)
        rank.busy = bool(facts.requests) and not facts.idle
        rank.status = RankStatus(
            rank.rank,
            rank.subscriber.connected,
            running,
            len(facts.requests) - running,
            rank.kv_used / total if total else 0.0,
        )

    def _counters(self, prompt: int, generated: int, preemptions: int) -> EngineCounters:
        """Every rank's latest figures together, with this step's token and preemption counts."""
        ranks = self._ranks
        total = sum(r.kv_total for r in ranks)
        return EngineCounters(
            running=sum(r.status.running for r in ranks),
            waiting=sum(r.status.waiting for r in ranks),
            kv_cache_usage=sum(r.kv_used for r in ranks) / total if total else 0.0,
            prompt_tokens=prompt,
            generation_tokens=generated,
            prefix_cache_queries=sum(r.prefix_queries for r in ranks),
            prefix_cache_hits=sum(r.prefix_hits for r in ranks),
            preemptions=preemptions,
        )


def api_client_id(server_id: str) -> str:
    """The client id the engine core's records show for a completion sent with ``server_id``.

    vLLM's completions endpoint names its engine requests ``cmpl-<request_id>-<prompt
    index>``; stepview sends one prompt per request.
    """
    return f"cmpl-{server_id}-0"


def _arrival(request_id: str, req: RequestFacts, samples: int, now: float) -> ArrivedRequest:
    """An adopted request as the ledger takes it (``samples``: its samples seen so far)."""
    intro = req.intro
    prompt = f"({req.num_prompt_tokens} prompt tokens)"
    waited = max(0.0, now - req.arrival_time)
    if intro is None:
        spec = SamplingSpec(max_tokens=req.max_tokens, n=samples)
        return ArrivedRequest(request_id, prompt, spec, waited)
    spec = SamplingSpec(
        temperature=intro.temperature,
        top_p=intro.top_p,
        top_k=max(0, intro.top_k),
        min_p=intro.min_p,
        max_tokens=req.max_tokens,
        n=samples,
        seed=intro.seed,
        presence_penalty=intro.presence_penalty,
        frequency_penalty=intro.frequency_penalty,
        repetition_penalty=intro.repetition_penalty,
        stop=tuple(intro.stop),
        logprobs=intro.logprobs,
        prompt_logprobs=intro.prompt_logprobs,
    )
    return ArrivedRequest(request_id, prompt, spec, waited, tuple(intro.prompt_token_ids))
