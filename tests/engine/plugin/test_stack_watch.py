"""The plug-in's stack watch, wake by wake: a hung step written once, an idle or paused core
never, a watch's ask answered on the channel while the step thread is stuck.

:meth:`StackWatch.tick` is driven with the time given by the test (no thread, no sleep); the
"step thread" is a thread of the test parked in :func:`stuck_in_a_step`. The channel is a real
publisher and a real subscriber on an ipc socket. No vLLM: the watch reads a counter and a
busy flag, which the plug-in wires to the capture and the scheduler.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from stepview.engine.plugin.publisher import FactsPublisher
from stepview.engine.plugin.stacks import StackWatch
from stepview.engine.records import stacks as files
from stepview.engine.records.stacks import STACKS_TOPIC, StacksWire, ask_topic, decode_stacks
from stepview.model.stacks import ASKED, HUNG_STEP, parse_dump

AFTER_S = 30.0  # the watchdog it arms never fires within a test


def stuck_in_a_step(inside: threading.Event, release: threading.Event) -> None:
    inside.set()
    release.wait()


@pytest.fixture
def step_thread() -> Iterator[int]:
    """A thread parked in :func:`stuck_in_a_step`; its ident."""
    inside, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=stuck_in_a_step, args=(inside, release), name="core-step")
    thread.start()
    inside.wait()
    yield thread.ident or 0
    release.set()
    thread.join()


class Core:
    """What the watch reads of a core: its step count and whether it has work, and what a
    publisher would have sent."""

    def __init__(self) -> None:
        self.steps = 0
        self.busy = True
        self.sent: list[StacksWire] = []
        self.asks: list[str] = []

    def take_asks(self) -> list[str]:
        asks, self.asks = self.asks, []
        return asks

    def send_stacks(self, stacks: StacksWire) -> None:
        self.sent.append(stacks)


@pytest.fixture
def core() -> Core:
    return Core()


@pytest.fixture
def watch(core: Core, tmp_path: Path) -> Iterator[StackWatch]:
    made = StackWatch(
        lambda: core.steps, lambda: core.busy, publisher=core, folder=tmp_path, after=AFTER_S
    )
    yield made
    made.close()


def hung(tmp_path: Path, watch: StackWatch) -> dict[str, object] | None:
    return files.read_json(files.hung_file(tmp_path, watch.pid))


def test_a_step_that_does_not_end_is_written_once_with_the_frame_it_hangs_in(
    core: Core, watch: StackWatch, tmp_path: Path, step_thread: int
) -> None:
    watch.tick(100.0)
    watch.tick(100.0 + AFTER_S - 0.1)
    assert hung(tmp_path, watch) is None and core.sent == []
    watch.tick(100.0 + AFTER_S)
    written = hung(tmp_path, watch)
    assert written is not None and f"for {AFTER_S:.0f} s" in str(written["note"])
    threads = {t.thread_id: t for t in parse_dump(str(written["text"])).threads}
    assert "stuck_in_a_step" in [f.function for f in threads[step_thread].frames]
    (sent,) = core.sent  # a server's watches are told too
    assert sent.how == HUNG_STEP and sent.text == written["text"] and sent.answers == []
    assert sent.names[step_thread] == "core-step"
    watch.tick(100.0 + 3 * AFTER_S)  # the same hang: not again
    assert len(core.sent) == 1
    core.steps += 1  # a step ended: the next hang is a new one
    watch.tick(200.0)
    watch.tick(200.0 + AFTER_S)
    assert [s.how for s in core.sent] == [HUNG_STEP, HUNG_STEP]


@pytest.mark.parametrize("why", ["idle", "paused"])
def test_a_core_without_work_to_step_is_no_hang(
    core: Core, watch: StackWatch, tmp_path: Path, why: str
) -> None:
    core.busy = False  # no requests, or vLLM's pause (stepview's p on its own core)
    for now in (0.0, AFTER_S, 10 * AFTER_S):
        watch.tick(now)
    assert hung(tmp_path, watch) is None and core.sent == []


def test_the_ready_file_says_who_answers_and_follows_new_threads(
    core: Core, tmp_path: Path, step_thread: int
) -> None:
    watch = StackWatch(lambda: 0, lambda: False, folder=tmp_path, after=AFTER_S)
    try:
        watch.start(answer_signal=False)
        ready = files.read_json(files.ready_file(tmp_path, watch.pid))
        assert ready is not None and ready["pid"] == watch.pid and ready["signal"] is None
        assert ready["step_thread"] == threading.get_ident()
        assert ready["names"][str(step_thread)] == "core-step"  # type: ignore[index]
    finally:
        watch.close()
    assert not files.ready_file(tmp_path, watch.pid).exists()  # a closed core answers nothing


def test_a_watchs_ask_is_answered_on_the_channel_from_the_watchs_thread(
    tmp_path: Path, step_thread: int
) -> None:
    publisher = FactsPublisher(f"ipc://{tmp_path}/facts.sock")
    context = zmq.Context()
    sub = context.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(publisher.address)
    sub.setsockopt(zmq.SUBSCRIBE, STACKS_TOPIC)
    watch = StackWatch(lambda: 0, lambda: True, publisher=publisher, folder=tmp_path, after=0)
    try:
        sub.setsockopt(zmq.SUBSCRIBE, ask_topic("n1"))  # the ask: a subscription no message has
        deadline = time.monotonic() + 10
        while not sub.poll(20):  # the subscription reaches the publisher in the background
            assert time.monotonic() < deadline, "no answer to the ask"
            watch.tick(time.monotonic())
        answer = decode_stacks(sub.recv())
    finally:
        watch.close()
        sub.close(0)
        context.term()
        publisher.close()
    assert answer.how == ASKED and answer.answers == ["n1"] and answer.pid == watch.pid
    threads = {t.thread_id: t for t in parse_dump(answer.text).threads}
    assert "stuck_in_a_step" in [f.function for f in threads[step_thread].frames]
