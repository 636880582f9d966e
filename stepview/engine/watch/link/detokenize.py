"""Other clients' text, decoded by the watched server itself (``--attach ... --api URL``).

The engine core's records carry token ids only: an adopted request's prompt shows as
``(N prompt tokens)`` and its completions have ids but no text. Given ``--api``, the
server's own tokenizer says what they read (vLLM's ``POST /detokenize``). Two parts:

* :class:`Detokenizer`: one background thread asking the server, one small call at a time,
  from a bounded queue: first the questions a held record waits for (below), then the
  other prompts (beyond :data:`MAX_QUEUED` questions the oldest prompt is dropped,
  unanswered; those of a request that ended are dropped unasked). Neither the driver's
  ``step()`` nor the records' receiver ever waits for it. A server without
  ``/detokenize`` (404) is asked once, then never again; any other failure (an error
  answer, a timeout, a lost server) leaves that one text unknown. Both are logged once,
  at info level; the text stays ``(N prompt tokens)`` / empty.
* :class:`Descriptions`: what was asked and answered for each adopted request, what a
  step tells the ledger (``StepResult.described``), and how long a record is held.

When the text is known:

* **A prompt** is asked for as soon as a record bringing the request's intro (its prompt
  ids) is received; the text is news of the next step read: the panes, the detail view
  and the history show it from then on.
* **A completion** is asked for as soon as a record saying the sample ended is received
  (it carries all the sample's token ids). The results file writes a request's record once,
  when it finishes, and a finished view never changes: the text has to be there by then.
  So a record that ends adopted requests is held unread until the server has answered for
  them (their completions, and their prompt if it is still being asked): :data:`HOLD_S`
  after the record was received, and beyond that for as long as the server keeps answering
  (an answer in each :data:`HOLD_S`: a busy server working through a burst, or a watch
  starved of CPU), up to :data:`HOLD_MAX_S`. Steps are dated by when they happened (the
  record's time), not when they were read, so holding costs the view a round trip of lag,
  never wrong timings. Past that (a stalled or lost server) the request finishes without
  the text, and text coming later is dropped: a results record carries the text only when
  it was known when the request finished. Every record is read once either way, so no
  result is lost or written twice.

On the server's machine the questions soon stop going to the server: a tokenizer read from
the model's folder (:mod:`~stepview.engine.watch.link.local_text`) decodes beside the first
answers, and once it agreed with them answers every question itself, at once (nothing is held).

The text is vLLM's decoding: special tokens included (a prompt's BOS, a chat template's
markers: what the model was given), as ``/detokenize`` has no ``skip_special_tokens``; a
sample that stopped on a stop token (EOS, or one of its ``stop_token_ids``) is decoded
without it, as vLLM's own text is.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from stepview.engine.records.facts import EndedFacts, StepFacts
from stepview.engine.watch.api.server_api import ApiError, ServerApi, drained
from stepview.engine.watch.link.local_text import AGREED, TextDecoder
from stepview.engine.watch.link.watched_core import WatchedCore
from stepview.model.engine_api import (
    ArrivedRequest,
    DescribedRequest,
    EndedRequest,
    OutputUpdate,
)
from stepview.model.errors import describe

log = logging.getLogger(__name__)

# The key of a request's prompt, beside its samples' indices.
PROMPT = -1
# Questions waiting for the server at most; beyond, the oldest is dropped (its text unknown).
MAX_QUEUED = 256
# Adopted requests followed at most (one whose end was never read is dropped oldest first).
MAX_KEPT = 4096
# How long a record that ends adopted requests waits for their text, from its reception ...
HOLD_S = 1.0
# ... and at most, while the server still answers a question in every HOLD_S.
HOLD_MAX_S = 5.0

Question = tuple[str, int]  # (stepview request id, PROMPT or sample index)


class Detokenizer:
    """One thread asking the server's ``/detokenize``: first what a held record waits for
    (the text of requests that ended), then other prompts, each kind oldest first.

    Why two queues: a burst of arrivals asks for hundreds of prompts at once, and a request
    that ends meanwhile holds the view until its text comes, for at most :data:`HOLD_S`.
    Behind those prompts its text would come too late, the view would be held each time,
    and the results would lose the text of every request of the burst.
    """

    def __init__(
        self,
        api: ServerApi,
        clock: Callable[[], float],
        local: Callable[[], TextDecoder | None] | None = None,
    ) -> None:
        """``clock``: the attached engine's, the one records are held by; ``local``: finds a
        decoder on this machine (:mod:`~stepview.engine.watch.link.local_text`), called once
        on the thread, used once it agreed with the server."""
        self._api = api
        self._clock = clock
        self._find_local = local
        self._candidate: TextDecoder | None = None  # decodes beside the server, until it agreed
        self._agreed = 0
        self.local: TextDecoder | None = None  # answers every question, once it agreed
        self._urgent: deque[tuple[Question, list[int]]] = deque()  # a held record's
        self._later: deque[tuple[Question, list[int]]] = deque()  # prompts of the others
        self._ready = threading.Condition()
        self._answers: queue.SimpleQueue[tuple[Question, str | None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._complained = False
        self.off = False  # the server has no /detokenize: nothing is asked any more
        # Questions the thread is done with (answered, failed or timed out), their answers
        # queued for :meth:`answers`: what a test waits on (written by the thread only).
        self.done = 0
        self.answered_at: float | None = None  # when the thread was last done with one
        if local is not None:  # at once: the probes go while the server is likely quiet
            self._start()

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="stepview-detokenize", daemon=True)
        self._thread.start()

    def ask(self, question: Question, token_ids: Sequence[int], *, urgent: bool = False) -> bool:
        """Queue a question (never waits); False when nothing is asked any more.

        ``urgent``: a held record waits for it. Beyond :data:`MAX_QUEUED` the oldest prompt
        is dropped unasked (the oldest urgent question when there are only those).
        """
        if self.off:
            return False
        with self._ready:
            if self._closed:
                return False
            local = self.local
            if local is not None:  # microseconds, on the caller's thread: nothing is held
                self._answers.put((question, local.decode(token_ids)))
                self.answered_at = self._clock()
                self.done += 1
                return True
            if len(self._urgent) + len(self._later) >= MAX_QUEUED:
                dropped, _ = (self._later or self._urgent).popleft()
                self._answers.put((dropped, None))
            (self._urgent if urgent else self._later).append((question, list(token_ids)))
            self._ready.notify()
            if self._thread is None:
                self._start()
        return True

    def hurry(self, request_ids: Collection[str]) -> None:
        """Make the queued prompts of ``request_ids`` urgent: a held record waits for them."""
        with self._ready:
            self._later, taken = parted(self._later, request_ids)
            self._urgent.extend(taken)

    def forget(self, request_ids: Collection[str]) -> None:
        """Drop the questions still queued about ``request_ids``: they ended, and a finished
        view never changes, so their answers would only delay the questions behind them."""
        with self._ready:
            self._later = parted(self._later, request_ids)[0]
            self._urgent = parted(self._urgent, request_ids)[0]

    def _differs(self, candidate: TextDecoder) -> None:
        self._candidate = None
        log.info(
            "stepview: the tokenizer in %s decodes differently from %s/detokenize: "
            "other clients' text is asked of the server",
            candidate.where,
            self._api.base_url,
        )

    def answers(self) -> list[tuple[Question, str | None]]:
        """Every answer since the last call (``None``: unknown); never waits."""
        return drained(self._answers)

    def close(self) -> None:
        """Ask nothing more (a call under way ends on its own; the thread is a daemon)."""
        with self._ready:
            self._closed = True
            self._urgent.clear()
            self._later.clear()
            self._ready.notify()

    def _run(self) -> None:
        if self._find_local is not None:
            try:
                self._candidate = self._find_local()
            except Exception as exc:  # the model's folder unknown (the server did not say)
                log.debug("stepview: no tokenizer to decode with here: %r", exc)
            self._probe()
        while True:
            with self._ready:
                while not (self._urgent or self._later or self._closed):
                    self._ready.wait()
                if self._closed:
                    return
                question, token_ids = (self._urgent or self._later).popleft()
            text = self._decode(token_ids)
            with self._ready:
                self._answers.put((question, text))
                self.answered_at = self._clock()
                self.done += 1
                if text is not None and self._candidate is not None:
                    self._compare(token_ids, text)

    def _probe(self) -> None:
        """Compare the candidate with the server on its probes, before any question (see
        :mod:`~stepview.engine.watch.link.local_text`); a server that cannot answer now has
        the first questions compared instead."""
        candidate = self._candidate
        if candidate is None:
            return
        for token_ids in candidate.probes():
            try:
                text = self._api.detokenize(token_ids)
            except ApiError as exc:
                if exc.status not in (400, 422):  # unreachable, no /detokenize, its trouble
                    return  # the questions will tell
                text = None  # ids its tokenizer does not have: not the one read here
            except Exception:  # a malformed answer
                text = None
            with self._ready:
                if text is None:
                    self._differs(candidate)
                else:
                    self._compare(token_ids, text)
                if self._candidate is None:
                    return

    def _compare(self, token_ids: list[int], text: str) -> None:
        """Decode here what the server just decoded; after :data:`AGREED` answers alike,
        answer every question here from now on (those queued too). Holds ``_ready``."""
        candidate = self._candidate
        assert candidate is not None
        try:
            same = candidate.decode(token_ids) == text
        except Exception:  # an id this tokenizer does not know: not the server's tokenizer
            same = False
        if not same:
            self._differs(candidate)
            return
        self._agreed += 1
        if self._agreed < AGREED:
            return
        self.local, self._candidate = candidate, None
        log.info(
            "stepview: other clients' text is decoded here with the tokenizer in %s "
            "(it agreed with %s/detokenize); the server is not asked any more",
            candidate.where,
            self._api.base_url,
        )
        for queued, ids in (*self._urgent, *self._later):
            self._answers.put((queued, candidate.decode(ids)))
            self.done += 1
        self._urgent.clear()
        self._later.clear()

    def _decode(self, token_ids: list[int]) -> str | None:
        """The server's text for ``token_ids``; ``None`` (said once in the log) if it failed."""
        if self.off:
            return None
        url = self._api.base_url
        try:
            return self._api.detokenize(token_ids)
        except ApiError as exc:
            if exc.status == 404:
                self.off = True
                log.info(
                    "stepview: %s/detokenize: %s; other clients' prompts and completions "
                    "stay token counts",
                    url,
                    exc,
                )
                return None
            why = str(exc)
        except Exception as exc:  # a malformed answer: its text is unknown, nothing more
            why = describe(exc)
        if not self._complained:
            self._complained = True
            log.info(
                "stepview: %s/detokenize failed (%s): that text stays token counts "
                "(later failures are not logged)",
                url,
                why,
            )
        return None


class Wait(NamedTuple):
    """A record held until the server answered for the requests it ends, or ``until``."""

    request_ids: tuple[str, ...]
    until: float


@dataclass(slots=True)
class _Asked:
    """What was asked and answered for one adopted request."""

    waiting: set[int] = field(default_factory=set)  # PROMPT / sample indices, unanswered
    prompted: bool = False  # its prompt was asked for
    prompt: str | None = None  # the prompt's text, until the ledger is told
    samples: dict[int, str] = field(default_factory=dict)  # told when the request ends
    arrived: bool = False  # the ledger has it: its prompt can be told


class Descriptions:
    """Adopted requests' text: asked on reception, told to the ledger step by step."""

    def __init__(self, detokenizer: Detokenizer) -> None:
        self.detokenizer = detokenizer
        self._asked: dict[str, _Asked] = {}  # stepview id -> its questions, oldest first
        self._news: set[str] = set()  # arrived requests whose prompt text came

    def received(
        self,
        core: WatchedCore,
        facts: StepFacts,
        now: float,
        *,
        own: Mapping[str, str],
        labelled: bool,
    ) -> Wait | None:
        """Ask about a record just received (at ``now``); how long it is to be held."""
        if self.detokenizer.off:
            return None
        for req in facts.requests:
            intro = req.intro
            if intro is None:
                continue
            request_id, _, adopted = core.sample_of(req.req_id, own, labelled)
            if adopted:
                entry = self._entry(request_id)
                if not entry.prompted:
                    entry.prompted = True
                    self._ask(entry, request_id, PROMPT, intro.prompt_token_ids)
        ending: dict[str, None] = {}
        asks: list[tuple[_Asked, str, int, list[int]]] = []
        prompts_queued = False
        for end in facts.ended:
            request_id, index, adopted = core.sample_of(end.req_id, own, labelled)
            if adopted:
                entry = self._entry(request_id)
                if index not in entry.samples and index not in entry.waiting:
                    asks.append((entry, request_id, index, spoken_ids(end)))
                prompts_queued = prompts_queued or PROMPT in entry.waiting
                ending[request_id] = None
        if not ending:
            return None
        if prompts_queued:
            self.detokenizer.hurry(ending)  # their prompts first, then their completions
        for entry, request_id, index, token_ids in asks:
            self._ask(entry, request_id, index, token_ids, urgent=True)
        return Wait(tuple(ending), now + HOLD_S)

    def ready(self, wait: Wait, now: float) -> bool:
        """True when the record held by ``wait`` may be read: its questions are answered,
        or the server stalled (no answer in the last :data:`HOLD_S`), or it was held long
        enough (see the module's docstring)."""
        if now >= wait.until:
            answered = self.detokenizer.answered_at
            if answered is None or now - answered >= HOLD_S:
                return True
            if now >= wait.until - HOLD_S + HOLD_MAX_S:
                return True
        self._collect()
        asked = self._asked
        for request_id in wait.request_ids:
            entry = asked.get(request_id)
            if entry is not None and entry.waiting:
                return False
        return True

    def told(
        self,
        arrived: Sequence[ArrivedRequest],
        outputs: Sequence[OutputUpdate],
        ended: Sequence[EndedRequest],
    ) -> tuple[DescribedRequest, ...]:
        """A step's news: prompts known of requests the ledger has (``arrived`` in this step
        or before), and the completions of those that end in it (then forgotten)."""
        self._collect()
        asked = self._asked
        news = self._news
        for request in arrived:
            entry = asked.get(request.request_id)
            if entry is not None and not entry.arrived:
                entry.arrived = True
                if entry.prompt is not None:
                    news.add(request.request_id)
        told: list[DescribedRequest] = []
        for request_id in news:
            entry = asked.get(request_id)
            if entry is not None and entry.prompt is not None:
                told.append(DescribedRequest(request_id, entry.prompt))
                entry.prompt = None
        news.clear()
        if asked:
            ending = [o.request_id for o in outputs if o.finished]
            ending.extend(e.request_id for e in ended)
            unanswered: set[str] = set()
            for request_id in ending:
                gone = asked.pop(request_id, None)
                if gone is None:
                    continue
                if gone.waiting:
                    unanswered.add(request_id)
                if gone.samples:
                    samples = tuple(sorted(gone.samples.items()))
                    told.append(DescribedRequest(request_id, None, samples))
            if unanswered:
                self.detokenizer.forget(unanswered)
        return tuple(told)

    def _entry(self, request_id: str) -> _Asked:
        asked = self._asked
        entry = asked.get(request_id)
        if entry is None:
            if len(asked) >= MAX_KEPT:
                oldest = next(iter(asked))
                if asked.pop(oldest).waiting:
                    self.detokenizer.forget((oldest,))
                self._news.discard(oldest)
            entry = asked[request_id] = _Asked()
        return entry

    def _ask(
        self,
        entry: _Asked,
        request_id: str,
        key: int,
        token_ids: Sequence[int],
        *,
        urgent: bool = False,
    ) -> None:
        if token_ids and self.detokenizer.ask((request_id, key), token_ids, urgent=urgent):
            entry.waiting.add(key)

    def _collect(self) -> None:
        """Take the server's answers in."""
        asked = self._asked
        for (request_id, key), text in self.detokenizer.answers():
            entry = asked.get(request_id)
            if entry is None:
                continue  # it ended without this text
            entry.waiting.discard(key)
            if text is None:
                continue
            if key != PROMPT:
                entry.samples[key] = text
            else:
                entry.prompt = text
                if entry.arrived:
                    self._news.add(request_id)


def parted(
    questions: deque[tuple[Question, list[int]]], request_ids: Collection[str]
) -> tuple[deque[tuple[Question, list[int]]], list[tuple[Question, list[int]]]]:
    """``questions`` without those about ``request_ids`` (the same deque when there are
    none), and those, in order."""
    taken = [item for item in questions if item[0][0] in request_ids]
    if not taken:
        return questions, taken
    return deque(item for item in questions if item[0][0] not in request_ids), taken


def spoken_ids(end: EndedFacts) -> list[int]:
    """The token ids vLLM's own text of an ended sample is made of.

    A sample that stopped on a stop token (``stop`` with no stop string: EOS, or one of
    ``stop_token_ids``, whose id is the stop reason) is decoded without it, as vLLM does
    (unless ``include_stop_str_in_output``, which the record does not carry).
    """
    ids = end.output_token_ids
    if ids and end.finish_reason == "stop" and not isinstance(end.stop_reason, str):
        return ids[:-1]
    return ids


def joined_waits(waits: Iterable[Wait | None]) -> Wait | None:
    """What a record folded from several waits for: all their requests, until the latest
    deadline (gathered in one pass: a fold joins thousands)."""
    found = [wait for wait in waits if wait is not None]
    if len(found) < 2:
        return found[0] if found else None
    ids = tuple(request_id for wait in found for request_id in wait.request_ids)
    return Wait(ids, max(wait.until for wait in found))
