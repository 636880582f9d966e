"""A watched server's engine core's stacks, asked through its plug-in on the records' channel.

Both ends are real and no vLLM runs: the plug-in's publisher and stack watch (its thread
started, as in a core), with a thread of the test parked in :func:`stuck_in_a_step` standing
for the core's step thread; and the watch's subscriber, read by a thread of the test as the
driver reads it (:meth:`ServerStacks.exchange` each time), while the flight recorder's
:meth:`ServerStacks.take` waits on another.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from stepview.engine.plugin.publisher import FactsPublisher
from stepview.engine.plugin.stacks import StackWatch
from stepview.engine.records.channel import FactsSubscriber
from stepview.engine.watch.link import server_stacks
from stepview.engine.watch.link.server_stacks import ServerStacks
from stepview.model.address import plugin_records
from stepview.model.stacks import ASKED, HUNG_STEP, NONE, CoreStacks

AFTER_S = 0.3  # a step "hangs" after this long


def stuck_in_a_step(inside: threading.Event, release: threading.Event) -> None:
    inside.set()
    release.wait()


@dataclass
class Core:
    rank: int
    subscriber: FactsSubscriber


class Channel:
    """The plug-in's end in a core whose step thread is stuck, and the watch's end read on a
    thread of its own, as the driver reads it."""

    def __init__(self, folder: Path) -> None:
        inside, self._release = threading.Event(), threading.Event()
        self.step = threading.Thread(target=stuck_in_a_step, args=(inside, self._release))
        self.step.start()
        inside.wait()
        self.publisher = FactsPublisher(f"ipc://{folder}/facts.sock")
        self.watch = StackWatch(
            lambda: 0,
            lambda: True,
            publisher=self.publisher,
            folder=folder,
            after=AFTER_S,
            wake=0.05,
        )
        self.core = Core(0, FactsSubscriber(self.publisher.address, stacks=True))
        self.stacks = ServerStacks(plugin_records(self.publisher.address, (0,)))
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read)
        self._reader.start()

    def _read(self) -> None:
        while not self._stop.wait(0.02):
            self.core.subscriber.poll()
            self.stacks.exchange([self.core])

    def close(self) -> None:
        self._stop.set()
        self._reader.join()
        self.watch.close()
        self.core.subscriber.close()
        self.publisher.close()
        self._release.set()
        self.step.join()


@pytest.fixture
def channel(tmp_path: Path) -> Iterator[Channel]:
    made = Channel(tmp_path)
    assert made.core.subscriber.wait_connected(10)
    yield made
    made.close()


def frames_of_step_thread(stacks: CoreStacks, step: threading.Thread) -> list[str]:
    (thread,) = [t for t in stacks.dump().threads if t.thread_id == step.ident]
    return [frame.function for frame in thread.frames]


def test_the_plugin_answers_an_ask_and_sends_a_hung_step_by_itself(channel: Channel) -> None:
    channel.watch.start(answer_signal=False)
    asked, *by_itself = channel.stacks.take(since=0.0)
    assert asked.how == ASKED, asked.why_none
    address = channel.publisher.address
    assert asked.core == f"{channel.watch.pid} (the engine core at {address}, rank 0)"
    assert "stuck_in_a_step" in frames_of_step_thread(asked, channel.step)
    # The step counter never moves: past AFTER_S the watch sends the hang by itself, once;
    # every recording from then on gets it (each take waits for an answer: no clock here).
    for _ in range(100):
        if any(s.how == HUNG_STEP for s in by_itself):
            break
        answer, *by_itself = channel.stacks.take(since=0.0)
        assert answer.how == ASKED
    (hung,) = by_itself
    assert hung.how == HUNG_STEP and "no step had ended for" in hung.note
    assert "stuck_in_a_step" in frames_of_step_thread(hung, channel.step)


def test_a_core_that_cannot_answer_is_said_so(
    channel: Channel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_stacks, "ANSWER_WAIT_S", 0.5)
    # The plug-in's watch never runs: a core stopped whole, or holding the GIL.
    (none,) = channel.stacks.take(since=0.0)
    assert none.how == NONE and none.text == ""
    assert none.why_none is not None and "no answer from the engine core at" in none.why_none
    assert "kill -STOP" in none.why_none
