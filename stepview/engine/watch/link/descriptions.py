"""What was asked and answered about each adopted request's text, and how long a record waits.

:class:`Descriptions` asks the :class:`~stepview.engine.watch.link.detokenize.Detokenizer`
about each record as it is received, tells the ledger what came (``StepResult.described``)
step by step, and says how long a record is held for the text of the requests it ends.

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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from stepview.engine.records.facts import EndedFacts, StepFacts
from stepview.engine.watch.link.detokenize import PROMPT, Detokenizer
from stepview.engine.watch.link.watched_core import WatchedCore
from stepview.model.engine_api import (
    ArrivedRequest,
    DescribedRequest,
    EndedRequest,
    OutputUpdate,
)

# Adopted requests followed at most (one whose end was never read is dropped oldest first).
MAX_KEPT = 4096
# How long a record that ends adopted requests waits for their text, from its reception ...
HOLD_S = 1.0
# ... and at most, while the server still answers a question in every HOLD_S.
HOLD_MAX_S = 5.0


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
        asks: list[tuple[_Asked, str, int, Sequence[int]]] = []
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
        if self.detokenizer.local is not None:
            self._decode_unasked(arrived, outputs)
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

    def _decode_unasked(
        self, arrived: Sequence[ArrivedRequest], outputs: Sequence[OutputUpdate]
    ) -> None:
        """Decode here what no record's reception asked about: the prompts of requests that
        arrive in this step unasked, and the text of samples that end in it unasked.

        Those are the requests that came and went, or ended, inside records the watch lost:
        caught up from the plug-in's log of ends, or ended by a full record after a gap, no
        reception saw their ids. A sample's output carries all its tokens when it ends, so
        its text is whole; the local tokenizer decodes it in microseconds (asking the server
        would come after the request had finished)."""
        local = self.detokenizer.local
        assert local is not None
        asked = self._asked
        for request in arrived:
            if request.request_id not in asked and request.prompt_token_ids:
                entry = self._entry(request.request_id)
                entry.prompted = True
                entry.prompt = local.decode(request.prompt_token_ids)
        for update in outputs:
            held = asked.get(update.request_id)
            if held is None:
                continue
            for c in update.completions:
                if c.finish_reason is None and not update.finished:
                    continue  # not its end
                if c.index not in held.samples and c.index not in held.waiting:
                    ids = spoken(c.token_ids, c.finish_reason, c.stop_reason)
                    held.samples[c.index] = local.decode(ids)

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


def spoken_ids(end: EndedFacts) -> Sequence[int]:
    """The token ids vLLM's own text of an ended sample is made of.

    A sample that stopped on a stop token (``stop`` with no stop string: EOS, or one of
    ``stop_token_ids``, whose id is the stop reason) is decoded without it, as vLLM does
    (unless ``include_stop_str_in_output``, which the record does not carry).
    """
    return spoken(end.output_token_ids, end.finish_reason, end.stop_reason)


def spoken(
    ids: Sequence[int], finish_reason: str | None, stop_reason: str | int | None
) -> Sequence[int]:
    """:func:`spoken_ids` of a sample's token ids, finish reason and stop reason."""
    if ids and finish_reason == "stop" and not isinstance(stop_reason, str):
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
