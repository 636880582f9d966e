"""One engine core of a watched server: its records read into steps for the driver.

:class:`~stepview.engine.watch.link.attached.AttachedEngine` watches a server's engine cores
(one per data-parallel rank); each is a :class:`WatchedCore` here: its subscriber, the requests it
holds as last seen, and its latest figures. :meth:`WatchedCore.read` turns one record into
what the driver's step needs (see :mod:`stepview.engine.watch.link.attached` for the rules):

* a request (one engine-core request per sample) seen for the first time is adopted; one
  whose intro was missed waits up to :data:`INTRO_WAIT_S` (of the server's time) for a
  fresh record;
* records say what changed (:mod:`stepview.engine.records.facts`), so each is read on top of
  the ones before, from a full record on, none skipped (the records' stream checks their
  sequence and asks for a full record after a gap);
* its output token ids grow by the tail each record carries; a tail that does not join up
  (records were lost) asks the publisher for a fresh record;
* a record says how the requests that left since the previous one ended: their last
  tokens and vLLM's finish reason (``abort``: ended ABORTED, by its client or on a stop
  string, which vLLM's front end enforces by aborting); one that left without that (named in
  ``finished`` only, or missing from a full record: the record saying how was lost) has left
  the engine, reason unknown;
* a record of another engine core (``core_started``) means the previous one is gone, and
  every request it held with it.

Work per record is what it names: a request that only waits is in no record and costs nothing.
Nothing here imports vLLM.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from itertools import chain

import msgspec

from stepview.engine.records.channel import FactsSubscriber, ZmqContext
from stepview.engine.records.curve import watch_keys
from stepview.engine.records.entries import EntryReader
from stepview.engine.records.facts import (
    EndedFacts,
    RequestFacts,
    RequestIntro,
    StepFacts,
    split_internal_id,
)
from stepview.engine.records.request_states import CoreState
from stepview.engine.records.stream import RecordStream
from stepview.engine.watch.link.adopting import ClientNames, arrival
from stepview.engine.watch.link.catching_up import CatchUp
from stepview.engine.watch.link.core_steps import CoreStep, ScheduledTimes
from stepview.engine.watch.link.unseen import UnseenRequests
from stepview.model.address import ZmqEndpoint
from stepview.model.engine_api import CompletionUpdate, EndedRequest, OutputUpdate
from stepview.model.snapshot import RankStatus, RequestState

log = logging.getLogger(__name__)

LEFT = "left the engine"
# vLLM's front end also ends a request on a stop string by aborting it in the engine core.
ABORTED_BY_CLIENT = "aborted by its client (or stopped on a stop string)"
RESTARTED = "server lost: its engine core restarted"
# A request whose intro (prompt ids, sampling) was missed waits this long for a resent one.
INTRO_WAIT_S = 1.0
# At most one resync request per engine core this often.
RESYNC_EVERY_S = 1.0
_RUNNING = int(CoreState.RUNNING)


@dataclass(slots=True)
class _Sample:
    """One engine-core request: one sample of a stepview request."""

    request_id: str  # stepview's id (all samples of a request share it)
    index: int
    client_id: str | None  # another client's id (None: a request stepview sent)
    tokens: list[int] = field(default_factory=list)
    counted: bool = False  # its prompt is in the prefix-cache figures


class WatchedCore:
    """One engine core (data-parallel ``rank``) publishing at ``endpoint``."""

    def __init__(
        self, rank: int, endpoint: ZmqEndpoint, queue: int = 0, *, stacks: bool = False,
        context: ZmqContext | None = None,
    ) -> None:  # fmt: skip
        """``queue``: which of the snapshot's queues its waiting requests are in; ``stacks``:
        also receive its thread stacks (a flight recorder's); ``context``: a pooled fleet's."""
        self.rank = rank
        self.address = address = endpoint.text
        self.queue = queue
        # CURVE keys (checked by the launcher before anything starts) for a tcp:// server.
        keys = watch_keys() if endpoint.tcp else None
        self.subscriber = FactsSubscriber(address, keys, stacks=stacks, context=context)
        self.stream = RecordStream(self.subscriber.resync)
        self.unseen_requests = UnseenRequests(address)
        self.catch_up = CatchUp(self.subscriber, self.unseen_requests)  # what the log says
        self.core_started: float | None = None
        self.samples: dict[str, _Sample] = {}  # core id -> sample
        self._per_request: dict[str, int] = {}  # stepview id -> its samples here
        self.names = ClientNames()  # what other clients' requests are called here
        self.unintroduced: dict[str, float] = {}  # core id -> record time first seen
        self.intros: dict[str, RequestIntro] = {}  # intros of records dropped unread
        self.times = ScheduledTimes()  # vLLM's scheduled times until the first tokens
        self.view = EntryReader(self._lookup, queue)
        self.connects = 0  # the subscriber's connect count as last seen
        self.settle_at: float | None = None  # reconnected with requests held: settle by then
        self.last_step: int | None = None
        self.last_time = 0.0
        self.was_idle = False
        # The server's wall clock against ours: the smallest (our time - record time) seen
        # on receiving a batch of records (the newest of a batch is the freshest): clock skew
        # plus the quickest delivery. Records are dated by it.
        self.offset: float | None = None
        self.behind = 0.0  # how late (beyond the offset) the last record was read, seconds
        self.next_resync = 0.0
        self.status = RankStatus(rank, False)
        self.kv_used = 0
        self.kv_total = 0
        self.busy = False
        self.prefix_queries = 0
        self.prefix_hits = 0

    @property
    def unseen(self) -> int:
        """Requests gone unseen here (:mod:`~stepview.engine.watch.link.unseen`)."""
        return self.unseen_requests.count

    def _lookup(self, core_id: str) -> str | None:
        sample = self.samples.get(core_id)
        return None if sample is None else sample.request_id

    def forget(self) -> list[str]:
        """Drop every request of the engine core that was here; their stepview ids."""
        ids = list(dict.fromkeys(s.request_id for s in self.samples.values()))
        self.samples.clear()
        self._per_request.clear()
        self.names.clear()
        self.unintroduced.clear()
        self.intros.clear()
        self.times.clear()
        self.stream.ended.clear()
        self.view = EntryReader(self._lookup, self.queue)
        self.busy = False
        self.behind = 0.0
        self.last_step = None
        self.kv_used = 0
        self.status = RankStatus(self.rank, self.status.connected)
        return ids

    def received(self, records: list[StepFacts], now: float) -> None:
        """Records read by ``now``: the newest tells how far the server's clock is."""
        lag = now - records[-1].time
        if self.offset is None or lag < self.offset:
            self.offset = lag

    def resync(self, now: float) -> None:
        """Ask for a fresh record (a token tail or an intro was missed), now and then."""
        if now >= self.next_resync:
            self.next_resync = now + RESYNC_EVERY_S
            self.subscriber.resync()

    # -- one record -----------------------------------------------------------------------

    def read(
        self,
        facts: StepFacts,
        now: float,
        *,
        own: Mapping[str, str],
        awaiting: Set[str],
        labelled: bool,
    ) -> CoreStep:
        """Fold one record in. ``own`` maps the client ids of requests stepview sent to
        stepview's ids; those ``awaiting`` their HTTP answer do not end when they leave;
        ``labelled`` suffixes adopted ids with ``@RANK``."""
        ended: list[EndedRequest] = []
        if self.core_started != facts.core_started:
            if self.core_started is not None:
                gone = self.forget()
                ended.extend(EndedRequest(rid, RequestState.ABORTED, RESTARTED) for rid in gone)
            self.core_started = facts.core_started
        samples = self.samples
        outputs: list[OutputUpdate] = []
        generated = 0
        stamps: dict[str, tuple[float, float]] = {}  # vLLM's times, on this machine's clock
        lag = now - facts.time
        offset = lag if self.offset is None else self.offset
        # What the record names first, then what ended, then what left without a word: a
        # record read as one of several (the view catching up) may name a request and end it.
        new_ids: dict[str, tuple[RequestFacts, int]] = {}  # stepview id -> (facts, samples)
        # The ends of records that came after a gap, unread, go with the full record that
        # follows it; what the log says was missed, with it or (answered late) any record.
        lost = self.stream.ended if facts.full else []
        caught = self.catch_up.take(facts, samples, lost)
        requests = facts.requests  # with those that came and went in the records missed:
        if caught is not None and caught.logged:  # adopted first, ended with the rest below
            requests = [*(logged.request for logged in caught.logged), *requests]
        for req in requests:
            sample = samples.get(req.req_id)
            if sample is None:
                sample = self._adopt(req, facts.time, now, own, labelled, new_ids)
                if sample is None:
                    continue
            if req.new_token_ids:
                generated += self._take_tokens(
                    sample, req.num_output_tokens, req.new_token_ids, outputs, now
                )
            if req.scheduled_at or req.first_token_at:
                self.times.seen(
                    req.req_id, sample.request_id, req.scheduled_at, req.first_token_at,
                    offset, stamps,
                )  # fmt: skip
        ends = facts.ended
        missing = () if caught is None else caught.missing
        partly = caught is not None and not caught.complete
        counted = lost if self.catch_up.after is None else ()  # read past: the answer says
        if counted or missing or partly:
            ids = chain((end.req_id for end in counted), missing)
            self.unseen_requests.past_the_log(ids, self.samples, partly)
        if lost or caught:
            logged = () if caught is None else (logged.end for logged in caught.logged)
            ends = [*lost, *logged, *ends]
            lost.clear()
        if ends:
            generated += self._finish(ends, now, awaiting, outputs, ended, (offset, stamps))
        if facts.finished:  # left: those that ended said how above, the rest did not
            self._stranded([c for c in facts.finished if c in self.unintroduced], own)
            ended.extend(self._gone(facts.finished, awaiting))
        if facts.full:  # those not in it left while their records were lost
            present = {req.req_id for req in facts.requests}
            ended.extend(self._gone([c for c in samples if c not in present], awaiting))
            self._stranded([c for c in self.unintroduced if c not in present], own)
            for core_id in [c for c in self.intros if c not in present]:
                del self.intros[core_id]
        per_request = self._per_request
        arrived = [  # (samples: those held now; all those seen, if it has already ended)
            arrival(rid, req, per_request.get(rid, seen), facts.time)
            for rid, (req, seen) in new_ids.items()
        ]
        scheduled = self.view.read(facts)
        self._figures(facts)
        interval = None  # none after an idle record: the time in between was no step's
        if self.last_step is not None and facts.step > self.last_step and not self.was_idle:
            interval = (facts.time - self.last_time) / (facts.step - self.last_step)
        self.last_step, self.last_time, self.was_idle = facts.step, facts.time, facts.idle
        self.behind = max(0.0, lag - offset)
        return CoreStep(
            scheduled,
            outputs,
            arrived,
            ended,
            facts.prefill_tokens,
            generated,
            self.view.new_preemptions,
            interval,
            self.behind,
            stamps,
        )

    def _adopt(
        self,
        req: RequestFacts,
        at: float,
        now: float,
        own: Mapping[str, str],
        labelled: bool,
        new_ids: dict[str, tuple[RequestFacts, int]],
    ) -> _Sample | None:
        """A sample seen for the first time; ``None`` while its intro is awaited."""
        core_id = req.req_id
        if req.intro is None:
            intro = self.intros.pop(core_id, None)
            if intro is not None:
                req = msgspec.structs.replace(req, intro=intro)
            elif at - self.unintroduced.setdefault(core_id, at) < INTRO_WAIT_S:
                self.resync(now)
                return None
        self.unintroduced.pop(core_id, None)
        request_id, index, client_id = self._named(core_id, own, labelled, give=True)
        if client_id is not None:  # adopted
            seen = new_ids.get(request_id)
            new_ids[request_id] = (req, 1) if seen is None else (seen[0], seen[1] + 1)
        sample = self.samples[core_id] = _Sample(request_id, index, client_id)
        self._per_request[request_id] = self._per_request.get(request_id, 0) + 1
        return sample

    def sample_of(
        self, core_id: str, own: Mapping[str, str], labelled: bool
    ) -> tuple[str, int, bool]:
        """(stepview id, sample index, adopted) of an engine-core request.

        ``own`` maps the client ids of requests stepview sent to its ids; any other is
        another client's, adopted under a short name of its own (:class:`ClientNames`;
        ``@RANK`` when ``labelled``): the name it has, or will be given when adopted.
        """
        request_id, index, client_id = self._named(core_id, own, labelled, give=False)
        return request_id, index, client_id is not None

    def _named(
        self, core_id: str, own: Mapping[str, str], labelled: bool, *, give: bool
    ) -> tuple[str, int, str | None]:
        """(stepview id, sample index, client id if another client's) of an engine-core
        request, its name given (``give``) or only looked up."""
        client_id, index = split_internal_id(core_id)
        request_id = own.get(client_id)
        if request_id is not None:
            return request_id, index or 0, None
        names = self.names
        request_id = names.give(client_id) if give else names.name(client_id)
        if labelled:
            request_id = f"{request_id}@{self.rank}"
        return request_id, index or 0, client_id

    def _pop(self, core_id: str) -> _Sample | None:
        """Forget one sample; it is returned, with whether it was its request's last."""
        sample = self.samples.pop(core_id, None)
        self.times.forget(core_id)
        if sample is not None:
            left = self._per_request[sample.request_id] - 1
            if left:
                self._per_request[sample.request_id] = left
            else:
                del self._per_request[sample.request_id]
                if sample.client_id is not None:
                    self.names.release(sample.client_id)
        return sample

    def _take_tokens(
        self,
        sample: _Sample,
        num_output_tokens: int,
        new: list[int],
        outputs: list[OutputUpdate],
        now: float,
        end: EndedFacts | None = None,
        finished: bool = False,
    ) -> int:
        """Append a token tail to the sample (an output when it grew, or it ``end``s); how
        many tokens were new."""
        tokens = sample.tokens
        start = num_output_tokens - len(new)
        have = len(tokens)
        added = 0
        if start > have:  # records were lost: the tail does not join up
            if end is None:
                self.resync(now)
                return 0
        elif start + len(new) > have:
            tokens.extend(new[have - start :])
            added = start + len(new) - have
        if added or end is not None:
            reason = None if end is None else end.finish_reason
            stop = None if end is None else end.stop_reason
            completion = CompletionUpdate(sample.index, "", tokens, None, None, reason, stop)
            outputs.append(OutputUpdate(sample.request_id, None, None, (completion,), finished))
        return added

    def _finish(
        self,
        ends: list[EndedFacts],
        now: float,
        awaiting: Set[str],
        outputs: list[OutputUpdate],
        ended: list[EndedRequest],
        stamped: tuple[float, dict[str, tuple[float, float]]],
    ) -> int:
        """Samples that ended, as the record says: their last tokens, finish reasons and (the
        first token was the last) vLLM's times, into ``stamped`` (offset, stamps).

        A request ends with its last sample; one aborted in the engine core ends ABORTED;
        one stepview sent only takes the tokens (its HTTP answer ends it, text included).
        """
        done: dict[str, list[tuple[_Sample, EndedFacts]]] = {}
        for end in ends:
            scheduled_at = self.times.scheduled.get(end.req_id, 0.0)
            sample = self._pop(end.req_id)
            if sample is not None:
                done.setdefault(sample.request_id, []).append((sample, end))
                if end.first_token_at:
                    self.times.seen(end.req_id, sample.request_id, scheduled_at,
                                    end.first_token_at, *stamped)  # fmt: skip
        remaining = self._per_request
        generated = 0
        for request_id, finishing in done.items():
            last = request_id not in remaining
            aborted = any(end.finish_reason == "abort" for _, end in finishing)
            quiet = aborted or request_id in awaiting  # tokens only, no finish reason
            for i, (sample, end) in enumerate(finishing):
                final = last and not quiet and i == len(finishing) - 1
                generated += self._take_tokens(
                    sample,
                    end.num_output_tokens,
                    end.output_token_ids,
                    outputs,
                    now,
                    None if quiet else end,
                    final,
                )
            if last and aborted and request_id not in awaiting:
                ended.append(EndedRequest(request_id, RequestState.ABORTED, ABORTED_BY_CLIENT))
        return generated

    def _gone(self, core_ids: Iterable[str], awaiting: Set[str]) -> list[EndedRequest]:
        """Samples that left without saying how; the requests with none left end."""
        left: dict[str, None] = {}
        for core_id in core_ids:
            self.unintroduced.pop(core_id, None)
            self.intros.pop(core_id, None)
            sample = self._pop(core_id)
            if sample is not None:
                left[sample.request_id] = None
        return [
            EndedRequest(request_id, RequestState.FINISHED, LEFT)
            for request_id in sorted(left)
            if request_id not in self._per_request
            and request_id not in awaiting  # stepview's own wait for their HTTP answer
        ]

    def _stranded(self, core_ids: list[str], own: Mapping[str, str]) -> None:
        """Requests that left while still waiting for their intro: no longer awaited, and
        other clients' counted unseen (stepview's own are in its ledger from the start)."""
        for core_id in core_ids:
            del self.unintroduced[core_id]
        self.unseen_requests.before_their_intro(
            [c for c in core_ids if split_internal_id(c)[0] not in own]
        )

    def _figures(self, facts: StepFacts) -> None:
        """Queue sizes, KV cache and prefix-cache counts after ``facts``."""
        samples = self.samples
        for req in facts.requests:
            if req.state == _RUNNING and req.num_computed_tokens:
                sample = samples.get(req.req_id)
                if sample is not None and not sample.counted:
                    sample.counted = True
                    self.prefix_queries += req.num_prompt_tokens
                    self.prefix_hits += req.num_cached_tokens
        total = facts.kv_total_blocks
        self.kv_total = total
        self.kv_used = max(0, total - facts.kv_free_blocks)
        self.busy = bool(facts.num_running or facts.num_waiting) and not facts.idle
        self.status = RankStatus(
            self.rank,
            self.subscriber.connected,
            facts.num_running,
            facts.num_waiting,
            self.kv_used / total if total else 0.0,
        )
