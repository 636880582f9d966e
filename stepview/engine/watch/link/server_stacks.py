"""A watched server's engine cores' thread stacks, for a flight recording, through the plug-in.

stepview cannot signal a server's engine core (another machine, another user), so it asks the
core's plug-in on the records' channel (:mod:`stepview.engine.records.stacks`): the plug-in's
stack watch, a thread of its own inside the core, answers with faulthandler's dump of every
thread, also while the core's step thread is stuck in a step with the GIL free; it also sends
the stacks by itself when a step has not ended for a while. A core stopped whole, or stuck
holding the GIL, answers nothing: the recording then says so, with what it sent by itself
before.

The sockets belong to the driver's thread, so :class:`ServerStacks` only queues asks there:
the attached engine calls :meth:`ServerStacks.exchange` each time it reads its subscribers
(every few tens of milliseconds, also while the server sends nothing), which sends them and
hands over what came. :meth:`ServerStacks.take` runs on the recorder's thread and waits for the
answers.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Sequence
from typing import Protocol

from stepview.engine.records.channel import FactsSubscriber
from stepview.engine.records.stacks import StacksWire
from stepview.model.address import PluginRecords
from stepview.model.stacks import ASKED, NONE, CoreStacks

ANSWER_WAIT_S = 3.0
"""How long the cores have to answer: the plug-in's watch reads asks twice a second."""


class StackedCore(Protocol):
    """What :meth:`ServerStacks.exchange` needs of a watched core."""

    rank: int

    @property
    def subscriber(self) -> FactsSubscriber: ...


class ServerStacks:
    """The stacks of a watched server's engine cores (``records``: its address and the ranks
    watched), one per rank."""

    def __init__(self, records: PluginRecords) -> None:
        self.address = records.text
        self.ranks = records.ranks
        self._changed = threading.Condition()
        self._asks: list[str] = []  # not sent yet
        self._waiting: set[str] = set()  # asks a take() still waits for
        self._answers: dict[tuple[int, str], StacksWire] = {}  # (rank, nonce) -> answer
        self._by_itself: dict[int, StacksWire] = {}  # rank -> the latest sent unasked

    # -- the driver's thread ---------------------------------------------------------------------

    def exchange(self, cores: Sequence[StackedCore]) -> None:
        """Send the asks queued since the last call; keep the stacks that came."""
        with self._changed:
            asks, self._asks = self._asks, []
        received: list[tuple[int, StacksWire]] = []
        for core in cores:
            subscriber = core.subscriber
            for nonce in asks:
                subscriber.ask_stacks(nonce)
            received += [(core.rank, wire) for wire in subscriber.take_stacks()]
        if not received:
            return
        with self._changed:
            for rank, wire in received:
                for nonce in wire.answers:
                    if nonce in self._waiting:  # a late answer: nobody waits for it now
                        self._answers[(rank, nonce)] = wire
                if not wire.answers:
                    self._by_itself[rank] = wire
            self._changed.notify_all()

    # -- the recorder's thread -------------------------------------------------------------------

    def take(self, since: float) -> list[CoreStacks]:
        """Each core's answer, or why there is none; then what it sent by itself since
        ``since`` (on the server's clock, as it says)."""
        nonce = secrets.token_hex(6)
        deadline = time.monotonic() + ANSWER_WAIT_S
        with self._changed:
            self._asks.append(nonce)
            self._waiting.add(nonce)
            while not all((rank, nonce) in self._answers for rank in self.ranks):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            self._waiting.discard(nonce)
            answers = {rank: self._answers.pop((rank, nonce), None) for rank in self.ranks}
            by_itself = dict(self._by_itself)
        found: list[CoreStacks] = []
        for rank in self.ranks:
            answer = answers[rank]
            if answer is not None:
                found.append(_stacks(answer, self.address))
            else:
                core = f"the engine core at {self.address} (rank {rank})"
                why = (
                    f"no answer from {core} within {ANSWER_WAIT_S:.0f} s: a core stopped whole "
                    f"(kill -STOP), or stuck holding the GIL in native code, answers nothing (so "
                    f"does a plug-in older than this stepview, or one the watch cannot reach)"
                )
                found.append(CoreStacks(core, time.time(), NONE, why_none=why))
            sent = by_itself.get(rank)
            if sent is not None and sent.taken >= since:
                found.append(_stacks(sent, self.address))
        return found


def _stacks(wire: StacksWire, address: str) -> CoreStacks:
    return CoreStacks(
        f"{wire.pid} (the engine core at {address}, rank {wire.dp_rank})",
        wire.taken,
        wire.how or ASKED,
        wire.text,
        note=wire.note,
        names=dict(wire.names),
        step_thread=wire.step_thread,
    )
