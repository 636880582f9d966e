"""``stepview --attach``: a running vLLM server, watched through its engine cores' records.

A server started with stepview's scheduler plug-in (``--scheduler-cls
stepview.engine.scheduler_plugin.StepviewScheduler`` and ``STEPVIEW_PUBLISH=ADDRESS``)
publishes one :class:`~stepview.engine.records.facts.StepFacts` per engine-core step: what
changed in it (a full record first, for a subscriber that joins), a few steps per message.
:class:`AttachedEngine` subscribes to them and implements the driver's
:class:`~stepview.model.engine_api.WatchedEngine` protocol, so the same driver and ledger
as a live run give the same panes, detail view, history, ``--record`` and results file. It
imports no vLLM (attaching works from a laptop, through an ssh tunnel): only zmq, msgspec
and, for ``--api``, the standard library.

How a record becomes a step (one record per ``step()``, oldest first):

* every engine-core request (one per sample) is known by its core id; the first time one is
  seen it is **adopted**: its stepview id is the client's id read from the core id
  (:func:`~stepview.engine.records.facts.split_internal_id`), suffixed ``@RANK`` when several
  ranks are watched; a request stepview itself sent through ``--api`` keeps stepview's id.
  The record's intro gives its prompt token ids and sampling parameters; the prompt text is
  not on the wire (``(N prompt tokens)``). With ``--api`` the server decodes its prompt
  and, when it ends, its completions (:mod:`~stepview.engine.watch.link.detokenize`: a record ending
  adopted requests is held until their text is in, briefly);
* states, prefill progress and preemptions come from the record as for stepview's own
  engine (:class:`~stepview.engine.records.entries.EntryReader`); output token ids arrive
  as the tail the record carries; the figures are the record's (queue sizes, KV blocks, the
  tokens scheduled for prefill and decode);
* a request a record names as gone (``finished``) without saying how it ended, or one a
  full record no longer holds, has **left** the engine: it ends FINISHED with finish reason
  ``left the engine`` (vLLM's own reason was in a record that was lost). One stepview sent
  waits for its HTTP answer instead, which carries the text and the real finish reason;
* records lost (zmq dropped them for a watch too slow, or the link dropped): the watch asks
  the plug-in's log of ends for every end after the last record it read, and the full record
  after the gap waits for the answer (:mod:`~stepview.engine.watch.link.catching_up`), so the
  requests that ended meanwhile end as they did, those that came and went are adopted and
  end too, and only what fell out of the log is counted unseen.

The link: while a rank's connection is lost (server killed, network down) the view is held
as it was, requests included, and the state is DISCONNECTED. When it is back, the server's
next record settles them: still there, they go on; gone, they left; an engine core that
restarted (another ``core_started``) means they were lost: ABORTED, ``server lost``. A
server that comes back with nothing in flight sends no record at all, so after
:data:`SETTLE_S` of silence the held requests end the same way. stepview quitting only
closes its sockets: the server never notices.

Each engine core's records are read by a
:class:`~stepview.engine.watch.link.watched_core.WatchedCore`; this module holds them
together: the backlog of records, the link, the API.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from functools import partial

from stepview.engine.records.channel import ChannelState, ZmqContext, wait_for_any
from stepview.engine.records.facts import StepFacts
from stepview.engine.watch.api.server_api import (
    ApiAnswer,
    ApiError,
    ServedModel,
    ServerApi,
    api_client_id,
)
from stepview.engine.watch.link.backlog import MAX_BACKLOG, Backlog, ReadPace, fold_oldest
from stepview.engine.watch.link.core_steps import CoreStep, merged, vllm_stamps
from stepview.engine.watch.link.descriptions import Descriptions
from stepview.engine.watch.link.detokenize import Detokenizer
from stepview.engine.watch.link.link_state import PluginWord, link_state
from stepview.engine.watch.link.local_text import served_tokenizer
from stepview.engine.watch.link.server_stacks import ServerStacks
from stepview.engine.watch.link.watched_core import LEFT, WatchedCore
from stepview.model.address import PluginRecords
from stepview.model.chat import ATTACHED_NO_CHAT, ChatMessage
from stepview.model.engine_api import (
    ArrivedRequest,
    ChatPrompt,
    DescribedRequest,
    EndedRequest,
    EngineRejected,
    LinkState,
    OutputUpdate,
    StepResult,
)
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineCounters, EngineInfo, RequestState

log = logging.getLogger(__name__)

SILENT = "lost while disconnected: gone when the server came back"
# One record per step while stepview keeps up; more than this many waiting (a fast server
# on a busy machine, or a view held), and a step reads up to CATCH_UP_STEP of them at once,
# for at most CATCH_UP_S (a record costs ~0.2 ms, whatever the queue; a starved process takes
# many times that in wall time), so that the sockets are read again soon.
CATCH_UP_AFTER = 64
CATCH_UP_STEP = 256
CATCH_UP_S = 0.1
# A read of the sockets takes at most this long (wall time; the rest waits for the next):
# a starved watch read thousands of queued records in one go, deaf to Ctrl+C for seconds.
RECEIVE_BUDGET_S = 0.2
# After a lost connection comes back, how long held requests wait for a record.
SETTLE_S = 2.0
# How often the server's API is asked what it serves, until it answers.
MODEL_RETRY_S = 2.0
_NO_ANSWERS: list[ApiAnswer] = []


class AttachedEngine:
    """A vLLM server stepview watches (see the module docstring); all calls on one thread.

    ``records`` is the plug-in's ``STEPVIEW_PUBLISH`` address with the data-parallel ranks to
    watch (each where :meth:`~stepview.model.address.ZmqEndpoint.for_rank` says). ``api``
    adds prompts through the server's completions endpoint (without it adding is refused)
    and decodes other clients' token ids into text through its ``/detokenize``.
    """

    def __init__(
        self,
        records: PluginRecords,
        *,
        api: ServerApi | None = None,
        clock: Callable[[], float] = time.time,
        stacks: ServerStacks | None = None,
        pace: ReadPace | None = None,
        turn: AbstractContextManager[object] | None = None,
        context: ZmqContext | None = None,
    ) -> None:
        """``stacks``: the engine cores' stacks a flight recorder asks for, through here;
        ``pace``: read the records at most this often (a fleet's watch), else each as a step;
        ``turn``: held to read the sockets, after the pace's wait (the fleet's: see ``Driver``);
        ``context``: the zmq context to subscribe in (a pooled fleet's, shared by its watches)."""
        self.address = address = records.text
        self._clock = clock
        self._api = api
        self._cores: list[WatchedCore] = []
        self._closed = threading.Event()
        self._stacks = stacks
        self._pace = pace
        self._turn = nullcontext() if turn is None else turn
        self._read_at = 0.0  # when records were last read (monotonic), for the pace
        try:
            for queue, (rank, endpoint) in enumerate(records.endpoints()):
                self._cores.append(
                    WatchedCore(rank, endpoint, queue, stacks=bool(stacks), context=context)
                )
        except BaseException:
            self.shutdown()
            raise
        self._labelled = len(self._cores) > 1
        self._backlog: Backlog = deque()  # records not read yet
        self._ended: list[EndedRequest] = []  # settled outside a record
        self._plugins = PluginWord()  # which plug-ins are off, and their vLLM versions
        self._answers: list[ApiAnswer] = []  # API answers not reported yet
        self._own: dict[str, str] = {}  # the server's client id -> stepview id (sent via API)
        self._awaiting: set[str] = set()  # stepview ids sent via the API, no answer yet
        self._info = EngineInfo(model=f"vLLM server at {address}", attached=address)
        self._served: ServedModel | None = None  # the API's answer, handed over once
        self._described = None
        if api is not None:
            find = partial(served_tokenizer, api)
            self._described = Descriptions(Detokenizer(api, clock, local=find))
            threading.Thread(
                target=self._look_up_model, args=(api,), name="stepview-api-model", daemon=True
            ).start()

    # -- Engine protocol ------------------------------------------------------------------

    @property
    def info(self) -> EngineInfo:
        """Fixed facts, and what the server's API said about it once it answered."""
        served, self._served = self._served, None
        if served is not None:
            self.describe_server(served.name, served.max_model_len, served.vllm_version)
        return self._info

    def describe_server(self, name: str, max_model_len: int, vllm_version: str) -> None:
        """What the server's API said about it (model name, context length, vLLM version)."""
        self._info = replace(
            self._info,
            model=f"{name} @ {self.address}",
            max_model_len=max_model_len or self._info.max_model_len,
            vllm_version=vllm_version or self._info.vllm_version,
        )

    def add_request(
        self, request_id: str, prompt: str, spec: SamplingSpec, prompt_token_ids: Sequence[int] = ()
    ) -> None:
        api = self._api
        if api is None:
            raise EngineRejected("attached without --api: stepview cannot add requests")
        self._own[api_client_id(api.server_id(request_id))] = request_id
        self._awaiting.add(request_id)
        api.submit(request_id, list(prompt_token_ids) if prompt_token_ids else prompt, spec)

    def chat_prompt(self, messages: Sequence[ChatMessage]) -> ChatPrompt:
        raise EngineRejected(ATTACHED_NO_CHAT)

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
        """True when a step is ready to report (a record, an API answer, a settled request).

        A paced watch first waits for its pace (a shutdown ends the wait)."""
        pace = self._pace
        every = 0.0 if pace is None or pace.scheduled else pace.every
        left = self._read_at + every - time.monotonic() if every else 0.0
        if left > 0:  # once per read: the records that come meanwhile are read together
            self._closed.wait(left)
        with self._turn:
            self._receive()
            return bool(self._answers or self._ended) or self._next_ready()

    def has_read(self) -> bool:
        with self._turn:
            return bool(self._answers or self._ended) or self._next_ready()

    def wait_for_records(self, timeout: float, wake: int) -> None:
        """An idle driver's wait (:class:`~stepview.model.engine_api.RecordWait`): over
        when a record arrives, for an event to leave within its step. A paced watch (a
        fleet's) reads at its pace anyway: it waits for ``wake`` alone."""
        paced = self._pace is not None and bool(self._pace.every)
        wait_for_any(() if paced else [c.subscriber for c in self._cores], timeout, wake)

    def step(self) -> StepResult:
        """The oldest record not read yet, with what else happened since the last step."""
        self._receive()
        ended, self._ended = self._ended, []
        answers, self._answers = self._answers, _NO_ANSWERS
        if not self._next_ready():
            outputs: list[OutputUpdate] = []
            for answer in answers:
                self._answered(answer, outputs, ended)
            told = self._told((), outputs, ended)
            return StepResult(
                tuple(outputs), {}, self._counters(), ended=tuple(ended), described=told
            )
        backlog = self._backlog
        if self._pace is not None and self._pace.every:
            self._read_at = time.monotonic()
            fold_oldest(backlog, len(backlog) - 1)  # what came since: one record per core
        count = 1 if len(backlog) <= CATCH_UP_AFTER else min(len(backlog), CATCH_UP_STEP)
        now = self._clock()
        reads: list[CoreStep] = []
        until = time.perf_counter() + CATCH_UP_S
        for i in range(count):
            if i and (not self._next_ready() or time.perf_counter() > until):
                break  # held for its text, or time to read the sockets: in a later step
            core, facts, _ = backlog.popleft()
            read = core.read(
                facts, now, own=self._own, awaiting=self._awaiting, labelled=self._labelled
            )
            for end in read.ended:
                self._awaiting.discard(end.request_id)
            reads.append(read)
        seqs = facts.max_num_running_reqs * len(self._cores)
        if (self._info.max_num_seqs, self._info.block_size) != (seqs, facts.block_size):
            self._info = replace(self._info, max_num_seqs=seqs, block_size=facts.block_size)
        step = reads[0] if len(reads) == 1 else merged(reads)
        ended.extend(step.ended)
        for answer in answers:
            self._answered(answer, step.outputs, ended)
        return StepResult(
            outputs=tuple(step.outputs),
            scheduled=step.scheduled,
            counters=self._counters(step.prompt_tokens, step.generated, step.preemptions),
            arrived=tuple(step.arrived),
            ended=tuple(ended),
            described=self._told(step.arrived, step.outputs, ended),
            interval=step.interval,
            # At the return, not at the read: the driver dates the step by the moment it gets
            # it, and a read of many records (or one waiting for the GIL) takes a while.
            age=step.age + (self._clock() - now),
            budget=core.view.budget,  # the last record's (one engine core's, with several)
            queue_reasons=tuple(c.view.queue_reason for c in self._cores),
            stamps=vllm_stamps(step.stamps, now - step.age) if step.stamps else {},
        )

    def link(self) -> LinkState:
        return link_state(
            self.address,
            self._cores,
            labelled=self._labelled,
            backlog=bool(self._backlog),
            plugins=self._plugins,
        )

    def shutdown(self) -> None:
        """Close the sockets; the server is left alone (so are requests sent through the API)."""
        self._closed.set()
        if self._described is not None:
            self._described.detokenizer.close()
        for core in self._cores:
            core.subscriber.close()
        self._cores = []
        self._backlog.clear()

    # -- receiving ------------------------------------------------------------------------

    def _receive(self) -> None:
        """Read every core's new records into the backlog; notice reconnects and silence."""
        now = self._clock()
        backlog = self._backlog
        for core in self._cores:
            subscriber = core.subscriber
            records = self._without_off(core, subscriber.poll(budget=RECEIVE_BUDGET_S))
            if subscriber.connects != core.connects:
                if core.connects:  # back: what went by meanwhile is to catch up on
                    core.stream.reset()
                core.connects = subscriber.connects
                if core.samples and core.core_started is not None:
                    core.settle_at = now + SETTLE_S  # back: the next record settles them
            connected = subscriber.state is ChannelState.CONNECTED
            if connected != core.status.connected:
                core.status = core.status._replace(connected=connected)
            if not connected:
                core.stream.reset()  # whatever comes after the link is back starts afresh
            if records:
                core.settle_at = None
                # Dated after the read: one that came during it must not look early.
                core.received(records, self._clock())
                if any(facts.full for facts in records):
                    self._name_model(records)
                described = self._described
                take = core.stream.take
                for received in records:
                    facts = take(received)
                    if facts is None:  # out of order (the full record asked for is next), or
                        continue  # a part of a full record before its last
                    wait = None
                    if described is not None:  # ask for its text now, and say what it waits for
                        wait = described.received(
                            core, facts, now, own=self._own, labelled=self._labelled
                        )
                    backlog.append((core, facts, wait))
            elif core.settle_at is not None and now >= core.settle_at and connected:
                core.settle_at = None
                for request_id in core.forget():  # nothing came: gone with the old core
                    self._ended.append(EndedRequest(request_id, RequestState.ABORTED, SILENT))
                    self._awaiting.discard(request_id)
            core.catch_up.received()
            core.catch_up.want(core.stream)  # records were missed: ask the log at once
        if self._stacks is not None:
            self._stacks.exchange(self._cores)
        if self._api is not None:
            answers = self._api.answers()
            if answers:
                self._answers = [*self._answers, *answers]
        excess = len(backlog) - MAX_BACKLOG
        if excess > 0:
            merged = fold_oldest(backlog, excess)
            log.info("stepview: %d records read as one with the next (view held or behind)", merged)

    def _name_model(self, records: list[StepFacts]) -> None:
        """The served model's name from a full record, for a watch the API does not describe
        (without ``--api``: a fleet of plug-in servers still says what each one runs)."""
        named = next((facts.model for facts in reversed(records) if facts.model), "")
        if named and not self._info.model.startswith(f"{named} @ "):
            self._info = replace(self._info, model=f"{named} @ {self.address}")

    def _without_off(self, core: WatchedCore, records: list[StepFacts]) -> list[StepFacts]:
        """``records`` less a plug-in's word that it switched itself off (kept for
        :meth:`link`). While one is off, :attr:`info` says there are no per-request states
        (``detailed_states``): what the snapshots, and a monitor through the metrics, learn."""
        kept = self._plugins.read(core, records)
        if self._info.detailed_states == bool(self._plugins.off):
            self._info = replace(self._info, detailed_states=not self._plugins.off)
        return kept

    def _next_ready(self) -> bool:
        """True when the oldest record may be read (it waits for no text, or no longer)."""
        backlog = self._backlog
        if not backlog:
            return False
        core, facts, wait = backlog[0]
        if core.catch_up.holds(facts):  # a full record after a gap: the log's answer first
            return False
        described = self._described
        return wait is None or described is None or described.ready(wait, self._clock())

    def _told(
        self,
        arrived: Sequence[ArrivedRequest],
        outputs: Sequence[OutputUpdate],
        ended: Sequence[EndedRequest],
    ) -> tuple[DescribedRequest, ...]:
        """Text the server decoded, for the step of ``arrived``, ``outputs`` and ``ended``."""
        described = self._described
        return () if described is None else described.told(arrived, outputs, ended)

    def _look_up_model(self, api: ServerApi) -> None:
        """Ask the API what it serves, until it answers (the server may not be up yet)."""
        while not self._closed.is_set():
            try:
                self._served = api.model()
                return
            except ApiError as exc:
                log.info("stepview: %s/v1/models: %s; asking again", api.base_url, exc)
            self._closed.wait(MODEL_RETRY_S)

    def _answered(
        self, answer: ApiAnswer, outputs: list[OutputUpdate], ended: list[EndedRequest]
    ) -> None:
        """The HTTP answer to a request stepview sent: its final output, or why it failed."""
        self._awaiting.discard(answer.request_id)
        if answer.state is not RequestState.FINISHED:
            ended.append(EndedRequest(answer.request_id, answer.state, answer.error or ""))
        elif not answer.completions:
            ended.append(EndedRequest(answer.request_id, RequestState.FINISHED, LEFT))
        else:
            prompt = answer.prompt_token_ids or None
            outputs.extend(
                OutputUpdate(answer.request_id, prompt, None, (c,), True)
                for c in answer.completions
            )

    def _counters(self, prompt: int = 0, generated: int = 0, preempted: int = 0) -> EngineCounters:
        """Every core's latest figures together, with this step's token and preemption counts."""
        cores = self._cores
        total = sum(c.kv_total for c in cores)
        return EngineCounters(
            running=sum(c.status.running for c in cores),
            waiting=sum(c.status.waiting for c in cores),
            kv_cache_usage=sum(c.kv_used for c in cores) / total if total else 0.0,
            prompt_tokens=prompt,
            generation_tokens=generated,
            prefix_cache_queries=sum(c.prefix_queries for c in cores),
            prefix_cache_hits=sum(c.prefix_hits for c in cores),
            preemptions=preempted,
        )
