"""Other clients' text, decoded by the watched server itself (``--attach ... --api URL``).

The engine core's records carry token ids only: an adopted request's prompt shows as
``(N prompt tokens)`` and its completions have ids but no text. Given ``--api``, the
server's own tokenizer says what they read (vLLM's ``POST /detokenize``).
:class:`Detokenizer` is one background thread asking the server, one small call at a time,
from a bounded queue: first the questions a held record waits for
(:mod:`~stepview.engine.watch.link.descriptions`), then the other prompts (beyond
:data:`MAX_QUEUED` questions the oldest prompt is dropped, unanswered; those of a request
that ended are dropped unasked). Neither the driver's ``step()`` nor the records' receiver
ever waits for it. A server without ``/detokenize`` (404) is asked once, then never again;
any other failure (an error answer, a timeout, a lost server) leaves that one text unknown.
Both are logged once, at info level; the text stays ``(N prompt tokens)`` / empty.

On the server's machine the questions soon stop going to the server: a tokenizer read from
the model's folder (:mod:`~stepview.engine.watch.link.local_text`) is compared with the
server on a few probes as the watch starts, and once it agreed answers every question
itself, at once (nothing is held).

The text is vLLM's decoding: special tokens included (a prompt's BOS, a chat template's
markers: what the model was given), as ``/detokenize`` has no ``skip_special_tokens``; a
sample that stopped on a stop token (EOS, or one of its ``stop_token_ids``) is decoded
without it, as vLLM's own text is (:func:`~stepview.engine.watch.link.descriptions.spoken_ids`).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Collection, Sequence

from stepview.engine.watch.api.server_api import ApiError, ServerApi, drained
from stepview.engine.watch.link.local_text import AGREED, TextDecoder
from stepview.model.errors import describe

log = logging.getLogger(__name__)

# The key of a request's prompt, beside its samples' indices.
PROMPT = -1
# Questions waiting for the server at most; beyond, the oldest is dropped (its text unknown).
MAX_QUEUED = 256
# ... and while a tokenizer read here is being compared with the server as the watch starts:
# the questions wait for that answer (asked of nobody), and a burst's every text is kept.
MAX_QUEUED_PROBING = 16384

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
        # queued for :meth:`answers`, or decoded here: what a test waits on (under `_ready`).
        self.done = 0
        self.answered_at: float | None = None  # when the thread was last done with one
        self._probing = local is not None  # until the probes are done (the thread's first task)
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
            most = MAX_QUEUED_PROBING if self._probing else MAX_QUEUED
            if len(self._urgent) + len(self._later) >= most:
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
            with self._ready:
                self._probing = False
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


def parted(
    questions: deque[tuple[Question, list[int]]], request_ids: Collection[str]
) -> tuple[deque[tuple[Question, list[int]]], list[tuple[Question, list[int]]]]:
    """``questions`` without those about ``request_ids`` (the same deque when there are
    none), and those, in order."""
    taken = [item for item in questions if item[0][0] in request_ids]
    if not taken:
        return questions, taken
    return deque(item for item in questions if item[0][0] not in request_ids), taken
