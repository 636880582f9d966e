"""An idle watch reads a record the moment it arrives, not at the driver's next look.

The driver waits in the attached engine's :meth:`AttachedEngine.wait_for_records` (zmq's
poll over the subscriber's sockets and a pipe the inbox rings for a command) instead of
sleeping a fixed 50 ms on its command queue: an event of ``--events`` then leaves within the
step that caused it. Each wait here is given far longer than the test waits for it, so a wait
that only ends on its timeout fails the test rather than passing late.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Iterator

import pytest

from stepview.engine.driver.inbox import Inbox
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.model.commands import Command, Pause
from tests.engine.watch.attach_helpers import Server, record, request

NEVER_S = 120.0  # a wait's own timeout: never reached when the wake-up works
GIVE_UP_S = 30.0  # how long the test waits for the wait to end


@pytest.fixture
def bell() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    os.close(read)
    os.close(write)


def test_a_record_ends_an_idle_watchs_wait(
    server: Server, engine: AttachedEngine, bell: tuple[int, int]
) -> None:
    assert not engine.has_unfinished()  # the connection's word read: nothing else is due
    woken = threading.Event()

    def wait() -> None:
        engine.wait_for_records(NEVER_S, bell[0])
        woken.set()

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    assert not woken.is_set()
    server.send(record(1, request("a-0123abcd")))
    assert woken.wait(GIVE_UP_S), "the record did not end the wait"
    assert engine.has_unfinished()
    assert [a.request_id for a in engine.step().arrived] == ["a"]


def test_the_bell_ends_an_idle_watchs_wait(engine: AttachedEngine, bell: tuple[int, int]) -> None:
    assert not engine.has_unfinished()
    woken = threading.Event()

    def wait() -> None:
        engine.wait_for_records(NEVER_S, bell[0])
        woken.set()

    threading.Thread(target=wait, daemon=True).start()
    os.write(bell[1], b"\0")
    assert woken.wait(GIVE_UP_S), "the bell did not end the wait"
    assert not engine.has_unfinished()


class _SleepsUntilRung:
    """A watched engine's wait that nothing but the inbox's bell ends (in time)."""

    def __init__(self) -> None:
        self.sleeping = threading.Event()
        self.rung = False

    def wait_for_records(self, timeout: float, wake: int) -> None:
        self.sleeping.set()
        readable, _, _ = select.select([wake], [], [], NEVER_S)
        self.rung = bool(readable)


def test_a_command_wakes_a_driver_sleeping_on_records() -> None:
    inbox = Inbox(lambda: 0.0)
    records = _SleepsUntilRung()
    inbox.wait_on(records)
    taken: list[Command] = []
    taker = threading.Thread(
        target=lambda: taken.extend(inbox.take(block=True, records=True)), daemon=True
    )
    taker.start()
    assert records.sleeping.wait(GIVE_UP_S)
    inbox.send(Pause())
    taker.join(GIVE_UP_S)
    assert not taker.is_alive(), "the command did not wake the driver"
    assert records.rung
    assert taken == [Pause()]
    inbox.close()


def test_a_command_sent_before_the_wait_skips_it() -> None:
    inbox = Inbox(lambda: 0.0)
    records = _SleepsUntilRung()
    inbox.wait_on(records)
    inbox.send(Pause())
    assert list(inbox.take(block=True, records=True)) == [Pause()]
    assert not records.sleeping.is_set()
    inbox.close()
