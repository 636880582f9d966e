"""The engine core's end of the channel: an XPUB socket the plug-in publishes its records on.

Runs inside vLLM's engine core, on its scheduling thread, and on the plug-in's stack watch
(:mod:`~stepview.engine.plugin.stacks`), which answers a watch's ask for the core's stacks
while the scheduling thread may be stuck in a step: the socket is used under a lock (zmq
sockets may change threads behind a full memory barrier), taken only to send and to read
subscriptions, which the scheduling thread does every few steps. XPUB hands the subscribers'
(un)subscribe messages to its owner, so the plug-in knows whether anyone listens and builds no
record when nobody does; sends never block (past the high-water mark zmq drops records for a
slow subscriber: the engine never waits for stepview); a server's sends the records of a few
steps together (``every``), since waking zmq's I/O thread is most of what a send costs. The
other end, the addresses and the wire format are shared with stepview's side
(:mod:`stepview.engine.records.channel`). A subscription to the catch-up topic is a question
to the log of what ended (:mod:`~stepview.engine.plugin.end_log`), answered to that subscriber.

An idle core runs no step, so the stack watch's thread takes the scheduling thread's part then
(:meth:`FactsPublisher.idle_turn`): questions are answered, a new subscriber gets its record,
and the idle record goes again, after :data:`IDLE_REPEAT_S`, then less and less often (up to
:data:`IDLE_REPEAT_MAX_S`). zmq may have dropped it for a watch that was behind, and without a
later record nothing tells that watch so: it showed a busy server for as long as the server
stayed idle. Sent again, it is read once (its ``seq`` says it came before) or reveals the gap.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import zmq
from zmq.auth.thread import ThreadAuthenticator

from stepview.engine.plugin.end_log import EndLog
from stepview.engine.records.catch_up import CATCH_UP_TOPIC, END_LOG_LINGER_S, asked_after
from stepview.engine.records.channel import (
    HIGH_WATER_MARK,
    SUBSCRIPTION_CHECK_S,
    set_heartbeats,
)
from stepview.engine.records.curve import ServerKeys, secure_publisher
from stepview.engine.records.facts import FACTS_TOPIC, StepFacts, encode_batch_into
from stepview.engine.records.stacks import StacksWire, asked_nonce, encode_stacks

_TOPIC_LEN = len(FACTS_TOPIC)
# At most this many records in one message (a burst of steps without a pause).
MAX_BATCH = 64
IDLE_REPEAT_S = 1.0
"""While the core is idle and someone listens, its idle record goes again after this long, then
after twice as long each time, up to :data:`IDLE_REPEAT_MAX_S` (a fleet of idle servers sends
its watch next to nothing)."""
IDLE_REPEAT_MAX_S = 8.0


class FactsPublisher:
    """The engine core's end: an XPUB socket bound at ``address``.

    Used from the engine core's scheduling thread, and from the stack watch's for
    :meth:`take_asks` and :meth:`send_stacks` (the socket under :attr:`_lock`).
    """

    def __init__(self, address: str, every: float = 0.0, keys: ServerKeys | None = None) -> None:
        """``every``: send the records of this many seconds together (0: each at once);
        ``keys``: CURVE, for watches whose public key is in ``keys.clients`` only."""
        self.address = address
        self.every = every
        self._pending: list[StepFacts] = []
        self._sent_at = 0.0
        self._context = zmq.Context()
        self._auth: ThreadAuthenticator | None = None
        sock = self._context.socket(zmq.XPUB)
        try:
            if keys is not None:
                self._auth = secure_publisher(sock, self._context, keys)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SNDHWM, HIGH_WATER_MARK)
            # Pass up every subscription, not only the first to a topic: each one (a new
            # stepview, or one asking to resync) is told apart and gets a fresh record.
            sock.setsockopt(zmq.XPUB_VERBOSE, 1)
            set_heartbeats(sock)
            sock.bind(address)
        except BaseException:
            sock.close(0)
            if self._auth is not None:
                self._auth.stop()
            self._context.term()
            raise
        self._sock = sock
        self._topics: set[bytes] = set()
        self._subscribed = False
        self.tails = True
        self.fresh = False
        self._next_check = 0.0
        self._buffer = bytearray(FACTS_TOPIC)
        self._lock = threading.Lock()
        self._asks: list[str] = []  # watches' asks for the core's stacks, not answered yet
        self.end_log = EndLog.from_env()  # what ended, for watches that lost records
        self._log_until = 0.0  # the end of the linger after the last subscriber left
        # Questions to the log of ends, answered on the scheduling thread only: the stack
        # watch reads subscriptions too, and the log changes under the scheduling thread.
        self._questions: list[bytes] = []
        self.answered = 0  # questions to the log answered, since the start
        self._idle: bytes | None = None  # the idle record, while it is the last one sent
        self._idle_at = 0.0  # when a message last went
        self._idle_every = IDLE_REPEAT_S  # the wait before the idle record goes again

    def wanted(self) -> bool:
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + SUBSCRIPTION_CHECK_S
            with self._lock:
                self._read_subscriptions()
                questions, self._questions = self._questions, []
                for topic in questions:
                    self._answer(topic)
            if self.end_log is not None:
                self._keep_log(now)
        return self._subscribed

    def _read_subscriptions(self) -> None:
        """Fold pending (un)subscribe messages into the set of subscribed prefixes.

        XPUB passes up every subscription (``XPUB_VERBOSE``) and the last unsubscription
        from a prefix, so the set holds exactly the prefixes someone is subscribed to, and a
        subscription to ours marks the next record :attr:`fresh`.
        """
        sock = self._sock
        topics = self._topics
        while True:
            try:
                message = sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            if not message:
                continue
            if message[0] == 1:
                if message.startswith(CATCH_UP_TOPIC, 1):  # a question, not a subscription
                    self._questions.append(message[1:])
                    continue
                nonce = asked_nonce(message[1:])
                if nonce is not None:  # an ask for the stacks, no subscription to keep
                    self._asks.append(nonce)
                    continue
                topics.add(message[1:])
                if FACTS_TOPIC.startswith(message[1:]):
                    self.fresh = True
            elif message[0] == 0:
                topics.discard(message[1:])
        self._subscribed = any(FACTS_TOPIC.startswith(t) for t in topics)

    def _keep_log(self, now: float) -> None:
        """Log ends while someone listens and for the linger after; then stop (and empty)."""
        log = self.end_log
        assert log is not None
        if self._subscribed:
            log.open = True
            self._log_until = now + END_LOG_LINGER_S
        elif log.open and now >= self._log_until:
            log.pause()

    def _answer(self, topic: bytes) -> None:
        """Answer a question (:mod:`~stepview.engine.records.catch_up`) under its own topic:
        only the subscriber that asked receives it. Once per question, never per step; on
        the scheduling thread, under :attr:`_lock`."""
        after = asked_after(topic)
        if after is None:
            return
        log = self.end_log
        answer = EndLog(1, 0).answer(after) if log is None else log.answer(after)  # off: empty
        with contextlib.suppress(zmq.ZMQError):
            self._sock.send(topic + answer, zmq.NOBLOCK, copy=True)
        self.answered += 1

    def deliver(self, facts: StepFacts) -> None:
        """Send ``facts``, with those held since the last send, unless ``every`` has not
        passed since then (a record of an idle core goes at once: no step comes after it; so
        does a part of a full record: held, the parts of several steps would be encoded in
        one, which is what sending a full record in parts avoids)."""
        pending = self._pending
        pending.append(facts)
        if not (facts.idle or facts.full or facts.to_come) and self.every:
            now = time.monotonic()
            if now - self._sent_at < self.every and len(pending) < MAX_BATCH:
                return
            self._sent_at = now
        self._send()

    def _send(self) -> None:
        # One frame, topic then the records: a second frame would cost ~4x the whole send.
        # The buffer is reused: pyzmq copies a message this small before send() returns.
        buffer = self._buffer
        pending = self._pending
        encode_batch_into(pending, buffer, _TOPIC_LEN)
        last = pending[-1]
        pending.clear()
        # XPUB drops a message for a subscriber whose queue is full instead of blocking (or
        # raising, unless ZMQ_XPUB_NODROP is set, which it is not).
        with self._lock:
            self._sock.send(buffer, zmq.NOBLOCK, copy=True)
        self._idle = None
        if last.idle:  # kept to send again while the core idles (encoded once per burst)
            idle = bytearray(FACTS_TOPIC)
            encode_batch_into([last], idle, _TOPIC_LEN)
            self._idle = bytes(idle)
            self._idle_every = IDLE_REPEAT_S
        self._idle_at = time.monotonic()

    def idle_turn(self, fresh_record: Callable[[], StepFacts]) -> None:
        """The scheduling thread's part, while the core holds no request (the stack watch's
        thread, under the capture's lock): answer the questions to the log, send a
        (re)subscriber ``fresh_record()``, and send the idle record again while anyone
        listens (module docstring)."""
        with self._lock:
            if self._sock.closed:
                return
            self._read_subscriptions()
            questions, self._questions = self._questions, []
            for topic in questions:
                self._answer(topic)
        if not self._subscribed:
            return
        if self.fresh:
            self.deliver(fresh_record())  # a full record: it goes at once
        elif self._idle is not None and time.monotonic() - self._idle_at >= self._idle_every:
            with self._lock, contextlib.suppress(zmq.ZMQError):
                self._sock.send(self._idle, zmq.NOBLOCK, copy=True)
            self._idle_at = time.monotonic()
            self._idle_every = min(2 * self._idle_every, IDLE_REPEAT_MAX_S)

    def take_asks(self) -> list[str]:
        """The asks for the core's stacks received since the last call (the stack watch's
        thread: reads the subscriptions itself, the scheduling thread may be stuck)."""
        with self._lock:
            if self._sock.closed:
                return []
            self._read_subscriptions()
            asks, self._asks = self._asks, []
        return asks

    def send_stacks(self, stacks: StacksWire) -> None:
        """Send the core's stacks to the watches subscribed to them (never blocks)."""
        with self._lock:
            if not self._sock.closed:
                with contextlib.suppress(zmq.ZMQError):
                    self._sock.send(encode_stacks(stacks), zmq.NOBLOCK)

    def close(self) -> None:
        if self._pending:
            with contextlib.suppress(zmq.ZMQError):
                self._send()
        with self._lock:
            self._sock.close(0)
        if self._auth is not None:
            self._auth.stop()
        self._context.term()
