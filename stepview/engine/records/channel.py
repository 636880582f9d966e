"""The channel between the scheduler plug-in and stepview when they are in different processes.

Both ends are plain zmq (pyzmq ships with vLLM); nothing here imports vLLM, so a client that
only attaches to a server can use it.

* the publisher (:class:`~stepview.engine.plugin.publisher.FactsPublisher`, in the plug-in's
  room: it runs inside the engine core) binds an **XPUB** socket. XPUB hands the
  subscribers' (un)subscribe messages to its owner, so the plug-in knows whether anyone
  listens and skips building records when nobody does. zmq reports an unsubscribe when a
  subscriber's connection ends (process gone, heartbeat timed out), so a subscriber that dies
  without a word still stops the capture. Sends never block: past the high-water mark zmq
  drops messages for that subscriber (a slow stepview loses records, the engine never waits).
* :class:`FactsSubscriber`, in stepview, connects a **SUB** socket. zmq connects in the
  background and reconnects by itself; zmq's heartbeats (``ZMQ_HEARTBEAT_*``) notice a peer
  that stopped answering even when no data flows (an idle engine core sends next to nothing), and
  zmq's socket monitor reports connects and disconnects. :attr:`FactsSubscriber.state` is
  built from those monitor events only: no home-made keep-alive on top.

Each message is one frame: :data:`~stepview.engine.records.facts.FACTS_TOPIC`, then a
msgpack array of one or more consecutive :class:`~stepview.engine.records.facts.StepFacts`;
or, to a subscriber that asked for them, the engine core's thread stacks
(:mod:`~stepview.engine.records.stacks`, a topic of their own).

Addresses are zmq endpoints, ``tcp://HOST:PORT`` or ``ipc://PATH``, parsed once into a
:class:`~stepview.model.address.ZmqEndpoint` (the command line's ``--attach``, the plug-in's
``STEPVIEW_PUBLISH``). With data-parallel ranks, every engine core publishes on its own
address derived from the base one (:meth:`~stepview.model.address.ZmqEndpoint.for_rank`):
rank 0 uses the base address unchanged, rank ``r`` adds ``r`` to a TCP port or appends
``_dp<r>`` to an ipc path (vLLM's own rule for its KV-event publisher, extended to ipc).
"""

from __future__ import annotations

import enum
import logging
import secrets
import time
from collections.abc import Sequence
from typing import Protocol

import msgspec
import zmq
from zmq.utils.monitor import parse_monitor_message

from stepview.engine.records.catch_up import (
    CATCH_UP_TOPIC,
    CatchUpAnswer,
    answer_payload,
    decode_answer,
    question_topic,
)
from stepview.engine.records.curve import (
    WATCH_SECRET_ENV,
    WATCH_SERVER_KEY_ENV,
    WatchKeys,
    secure_subscriber,
)
from stepview.engine.records.facts import FACTS_TOPIC, StepFacts, decode_batch
from stepview.engine.records.stacks import STACKS_TOPIC, StacksWire, ask_topic, decode_stacks

log = logging.getLogger(__name__)

# The plug-in's configuration, read in the engine core process: the publishing address (a
# base address with data-parallel ranks) and the scheduler class to extend.
PUBLISH_ENV = "STEPVIEW_PUBLISH"
# "1": the server's owner allows a PUBLISH_ENV address other machines can reach.
PUBLISH_REMOTE_ENV = "STEPVIEW_PUBLISH_REMOTE"
BASE_ENV = "STEPVIEW_SCHEDULER_BASE"

# zmq heartbeats on both ends: a peer that answers no ping for HEARTBEAT_TIMEOUT_MS is gone.
HEARTBEAT_IVL_MS = 1000
HEARTBEAT_TIMEOUT_MS = 3000
RECONNECT_IVL_MS = 100
RECONNECT_IVL_MAX_MS = 1000
# Handshakes failed with no reason before the watch guesses a CURVE mismatch (1 s of retries).
UNEXPLAINED_REFUSALS = 10
# Records queued per subscriber before zmq drops (each is one step; a few KB at most).
HIGH_WATER_MARK = 1000
# A server's plug-in sends the records of the steps of this long in one message (waking zmq's
# I/O thread costs tens of microseconds a time, far more than encoding a record); a record
# saying the engine core went idle goes at once. STEPVIEW_PUBLISH_EVERY_MS sets it (0: every
# record at once, as stepview's own engine core in its own process has it).
PUBLISH_EVERY_ENV = "STEPVIEW_PUBLISH_EVERY_MS"
PUBLISH_EVERY_S = 0.05
# Requests per part of a new subscriber's full record (stepview.engine.plugin.naming): built
# in one step, a full record of thousands of requests is that step's delay; 0 sends it whole
# (stepview's own engine in its own process reads each step's record with its outputs).
FULL_PART_ENV = "STEPVIEW_FULL_PART"
# How often the publisher reads (un)subscribe messages: a new subscriber waits at most this
# long for its first record; reading them every step would cost a syscall per step.
SUBSCRIPTION_CHECK_S = 0.05
# Stacks a subscriber keeps until they are taken (each one is a few KB of text).
KEPT_STACKS = 16
_TOPIC_LEN = len(FACTS_TOPIC)


def wait_for_any(subscribers: Sequence[FactsSubscriber], timeout: float, wake: int) -> None:
    """Block up to ``timeout`` seconds until one of ``subscribers`` has a message or word of
    its connection, or the file descriptor ``wake`` is readable; read nothing.

    zmq's poll releases the GIL and wakes within microseconds of a message: a reader waiting
    here reads each record as it comes instead of at its next look."""
    poller = zmq.Poller()
    poller.register(wake, zmq.POLLIN)
    for subscriber in subscribers:
        subscriber.register(poller)
    poller.poll(max(0, int(timeout * 1000) + 1))


def set_heartbeats(sock: zmq.Socket[bytes]) -> None:
    sock.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
    # Ask the peer to drop us too if it hears nothing from us for that long.
    sock.setsockopt(zmq.HEARTBEAT_TTL, HEARTBEAT_TIMEOUT_MS)


class FactsSink(Protocol):
    """Where the plug-in hands its records: an in-process listener or a publisher."""

    tails: bool
    """Whether records should say how requests ended (:class:`EndedFacts`): only a client
    that does not see vLLM's own outputs needs it (an attached stepview)."""

    fresh: bool
    """Someone (re)subscribed since the last record: the next one should carry what is sent
    only once (every request's output tokens from the start, its intro). The plug-in clears
    it when it builds that record."""

    def wanted(self) -> bool:
        """True when a record built now would be delivered to someone."""

    def deliver(self, facts: StepFacts) -> None: ...

    def close(self) -> None: ...


class ChannelState(enum.Enum):
    """What zmq's monitor last said about the subscriber's connection."""

    CONNECTING = "connecting"  # never connected yet
    CONNECTED = "connected"  # handshake done: records flow
    DISCONNECTED = "disconnected"  # the publisher went away; zmq keeps trying to reconnect


_LOST = frozenset(
    {
        zmq.EVENT_DISCONNECTED,
        zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL,
        zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
        zmq.EVENT_HANDSHAKE_FAILED_AUTH,
    }
)
_MONITORED = zmq.EVENT_HANDSHAKE_SUCCEEDED | sum(_LOST)


ZmqContext = zmq.Context[zmq.Socket[bytes]]


class FactsSubscriber:
    """stepview's end: a SUB socket connected to ``address``, polled without blocking.

    Call :meth:`poll` from one thread (the one that owns the subscriber). ``connects`` and
    ``disconnects`` count monitor events, so a caller polling rarely can still tell that the
    publisher went away and came back in between (``core_started`` in the records tells a
    restarted engine core from the same one).
    """

    def __init__(
        self,
        address: str,
        keys: WatchKeys | None = None,
        *,
        stacks: bool = False,
        context: ZmqContext | None = None,
    ) -> None:
        """``keys``: CURVE, for a server publishing with it (see :mod:`.curve`); ``stacks``:
        also receive the engine core's thread stacks (:mod:`.stacks`) into :attr:`stacks`;
        ``context``: a zmq context shared with other subscribers (a large fleet's: each context
        has an I/O thread of its own), else one of its own, ended with it."""
        self.address = address
        self._owned = context is None
        self._context = zmq.Context() if context is None else context
        sock = self._context.socket(zmq.SUB)
        if keys is not None:
            secure_subscriber(sock, keys)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, HIGH_WATER_MARK)
        sock.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
        set_heartbeats(sock)
        sock.setsockopt(zmq.SUBSCRIBE, FACTS_TOPIC)
        if stacks:
            sock.setsockopt(zmq.SUBSCRIBE, STACKS_TOPIC)
        self.stacks: list[StacksWire] = []
        """Stacks received and not taken yet (:meth:`take_stacks`), the latest few."""
        self._monitor = sock.get_monitor_socket(_MONITORED)
        sock.connect(address)
        self._sock = sock
        self.state = ChannelState.CONNECTING
        self.connects = 0
        self.disconnects = 0
        self.bad_records = 0
        self._curve = keys is not None
        self.refused = 0  # handshakes that failed: CURVE keys that do not match the server's
        self.refusal: str | None = None  # why, for the user
        self._hedged = False  # the refusal is a guess (see _read_monitor)
        self._unexplained = 0  # handshakes failed without a reason since the last success
        self.answers: list[CatchUpAnswer] = []  # catch-up answers received, not taken yet
        self._name = secrets.token_hex(4).encode()  # tells this watch's questions apart
        self._asked: bytes | None = None  # the question subscribed to

    @property
    def connected(self) -> bool:
        return self.state is ChannelState.CONNECTED

    def poll(self, timeout: float = 0.0, budget: float | None = None) -> list[StepFacts]:
        """Every record received since the last call (oldest first), or those read within
        ``budget`` seconds of wall time (the rest stay queued for the next call).

        Never blocks with ``timeout=0``; otherwise waits up to ``timeout`` seconds for the
        first record when none is there yet. The budget is for a reader that can fall far
        behind (a niced watch on a box its server saturates): thousands of queued records
        decoded in one call would keep it from anything else, a stop included, for seconds.
        """
        self._read_monitor()
        records: list[StepFacts] = []
        sock = self._sock
        if timeout > 0:
            sock.poll(int(timeout * 1000) + 1, zmq.POLLIN)
        until = None if budget is None else time.perf_counter() + budget
        while True:
            if until is not None and records and time.perf_counter() >= until:
                return records  # at least one message read per call, whatever the budget
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return records
            if len(frames) != 1:
                self._bad(f"{len(frames)} frames")
                continue
            if frames[0].startswith(STACKS_TOPIC):
                self._keep_stacks(frames[0])
                continue
            if frames[0].startswith(CATCH_UP_TOPIC):
                self._answered(frames[0])
                continue
            try:
                records.extend(decode_batch(memoryview(frames[0])[_TOPIC_LEN:]))
            except msgspec.DecodeError as exc:
                self._bad(str(exc))

    def register(self, poller: zmq.Poller) -> None:
        """Have ``poller`` wake when a message or word of the connection arrives (read
        them with :meth:`poll`): for a reader that sleeps until there is news."""
        poller.register(self._sock, zmq.POLLIN)
        poller.register(self._monitor, zmq.POLLIN)

    def _keep_stacks(self, message: bytes) -> None:
        try:
            self.stacks.append(decode_stacks(message))
        except msgspec.DecodeError as exc:
            self._bad(str(exc))
        del self.stacks[:-KEPT_STACKS]

    def take_stacks(self) -> list[StacksWire]:
        """The stacks received since the last call, oldest first."""
        taken, self.stacks = self.stacks, []
        return taken

    def ask_stacks(self, nonce: str) -> None:
        """Ask the publisher's plug-in for the core's stacks now: a subscription it sees (and
        no message matches), dropped at once; the answer names ``nonce``."""
        topic = ask_topic(nonce)
        self._sock.setsockopt(zmq.SUBSCRIBE, topic)
        self._sock.setsockopt(zmq.UNSUBSCRIBE, topic)

    def wait_connected(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds until the handshake with a publisher is done."""
        deadline = time.monotonic() + timeout
        while not self.connected:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._monitor.poll(int(left * 1000) + 1):
                self._read_monitor()
        return True

    def _read_monitor(self) -> None:
        monitor = self._monitor
        while True:
            try:
                frames = monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            message = parse_monitor_message(frames)
            event = message["event"]
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.state = ChannelState.CONNECTED
                self.connects += 1
                self._unexplained = 0
            elif event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                self._refused(f"{self.address} refused this watch's CURVE key")
            elif (
                event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                and message["value"] == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
            ):
                self._refused(self._mismatch(certain=True))
            elif event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                # What a mechanism mismatch mostly looks like from this end: the publisher
                # hangs up before the greeting says why (the precise event comes only when
                # this end reads the greeting first: rarely on a busy machine). Say it with a
                # hedge after a few, and let a precise one replace it.
                self._unexplained += 1
                if self._unexplained == UNEXPLAINED_REFUSALS:
                    self._refused(self._mismatch(certain=False), hedged=True)
            if event in _LOST and self.state is ChannelState.CONNECTED:
                self.state = ChannelState.DISCONNECTED
                self.disconnects += 1

    def _mismatch(self, certain: bool) -> str:
        """What to do when the publisher's CURVE setting is not this watch's."""
        cause = "" if certain else "refused every handshake: it may publish "
        if self._curve:
            return (
                f"{self.address} {cause or 'publishes '}without CURVE: unset {WATCH_SECRET_ENV} "
                f"and {WATCH_SERVER_KEY_ENV}"
                + ("" if certain else f", or check that {WATCH_SERVER_KEY_ENV} is its public key")
            )
        return (
            f"{self.address} {cause or 'publishes '}with CURVE: set {WATCH_SECRET_ENV} and "
            f"{WATCH_SERVER_KEY_ENV} (see docs/attach-and-fleet.md, Watching vllm serve)"
        )

    def _refused(self, why: str, hedged: bool = False) -> None:
        """A handshake failed for the keys (zmq retries it by itself): say why, once (a
        precise reason replaces a guess)."""
        self.refused += 1
        if self.refusal is None or (self._hedged and not hedged):
            self.refusal = why
            self._hedged = hedged
            log.warning("stepview: %s", why)

    def resync(self) -> None:
        """Ask the publisher for a fresh record (every request's output from the start).

        For a subscriber that lost records (it fell behind, or held them back): it
        unsubscribes and subscribes again, and the publisher, which sees every subscription,
        marks its next record fresh. Records sent in between may be lost; the fresh one
        makes up for them.
        """
        self._sock.setsockopt(zmq.UNSUBSCRIBE, FACTS_TOPIC)
        self._sock.setsockopt(zmq.SUBSCRIBE, FACTS_TOPIC)

    def ask_catch_up(self, after: int, fresh: bool = True) -> None:
        """Ask the plug-in for the ends logged after record ``after``
        (:mod:`~stepview.engine.records.catch_up`): the answer comes to :attr:`answers`.
        Asking again sends the question anew (an answer can be dropped like a record);
        ``fresh`` asks under a new name, and from then on only answers to it are taken (one
        made before may be on its way, and be too old to hold what the asker needs)."""
        self.unask()
        if fresh:
            self._name = secrets.token_hex(4).encode()
        self._asked = question_topic(self._name, after)
        self._sock.setsockopt(zmq.SUBSCRIBE, self._asked)

    def unask(self) -> None:
        """Drop the question (a link that comes back would ask it again)."""
        if self._asked is not None:
            self._sock.setsockopt(zmq.UNSUBSCRIBE, self._asked)
            self._asked = None

    def _answered(self, message: bytes) -> None:
        if not message.startswith(b"%s%s/" % (CATCH_UP_TOPIC, self._name)):
            return  # an answer to a question asked under an older name
        try:
            self.answers.append(decode_answer(answer_payload(message)))
        except (ValueError, msgspec.DecodeError) as exc:
            self._bad(f"catch-up answer: {exc}")

    def _bad(self, why: str) -> None:
        if not self.bad_records:
            log.warning("stepview: undecodable record from %s ignored: %s", self.address, why)
        self.bad_records += 1

    def close(self) -> None:
        """Close both sockets at once (no linger); the publisher sees an unsubscribe."""
        self._sock.disable_monitor()
        self._monitor.close(0)
        self._sock.close(0)
        if self._owned:
            self._context.term()
