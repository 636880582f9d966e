"""Records and a publisher for testing ``stepview --attach`` without vLLM.

A :class:`Server` stands for one engine core of a watched server: a real
:class:`FactsPublisher` (zmq, ipc socket in a temporary folder) that tests make publish the
records they write out with :func:`request` and :func:`record`. A :class:`Watcher` folds
the attached engine's steps into a :class:`RequestLedger`, the way the driver does, on a
test's :class:`Clock`.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import msgspec

from stepview.engine.driver.ledger import RequestLedger
from stepview.engine.plugin.publisher import FactsPublisher
from stepview.engine.records.facts import (
    EndedFacts,
    RequestFacts,
    RequestIntro,
    StepFacts,
)
from stepview.engine.records.request_states import CoreState
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.model.engine_api import Engine, StepResult
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestView

WAITING = int(CoreState.WAITING)
RUNNING = int(CoreState.RUNNING)
PREEMPTED = int(CoreState.PREEMPTED)
NOW = 1_000_000.0  # the servers' wall clock in these records


def request(
    core_id: str,
    state: int = RUNNING,
    *,
    prompt: int = 8,
    computed: int | None = None,
    outputs: int = 0,
    new: Sequence[int] = (),
    intro: bool = True,
    temperature: float = 0.0,
    max_tokens: int = 16,
    preemptions: int = 0,
    waited: float = 1.0,
) -> RequestFacts:
    """One engine-core request; ``computed`` defaults to prompt + outputs when running."""
    if computed is None:
        computed = prompt + outputs if state == RUNNING else 0
    return RequestFacts(
        core_id,
        state,
        prompt,
        computed,
        outputs,
        preemptions,
        1 if state == RUNNING else 0,
        2,
        0,
        NOW - waited,
        0,
        max_tokens,
        False,
        list(new),
        RequestIntro(list(range(100, 100 + prompt)), temperature, seed=7, ignore_eos=True)
        if intro
        else None,
    )


def record(
    step: int,
    *requests: RequestFacts,
    started: float = 1.0,
    finished: Sequence[str] = (),
    idle: bool = False,
    rank: int = 0,
    free: int = 60,
    ended: Sequence[EndedFacts] = (),
    full: bool = True,
    seq: int | None = None,
    head: str | None = None,
) -> StepFacts:
    """One engine-core step of a core started at ``started``, 10 ms after the previous.

    A full record by default (``requests`` is every request the core holds: one absent has
    left), as the plug-in sends to a new subscriber; ``full=False`` makes it a record of what
    changed, numbered ``seq`` (the step's number by default) after the one before. ``head``
    is the request vLLM's scan of the waiting queue stopped at.
    """
    running = sum(1 for r in requests if r.state == RUNNING)
    return StepFacts(
        step,
        step,
        NOW + step * 0.01,
        started,
        rank,
        step if seq is None else seq,
        full,
        2048,
        0,
        running,
        32,
        running,
        len(requests) - running,
        free,
        100,
        16,
        [],
        list(finished),
        list(requests),
        idle,
        list(ended),
        head,
    )


def part(
    seq: int,
    to_come: int,
    *names: str,
    full: bool = False,
    finished: Sequence[str] = (),
    ended: Sequence[EndedFacts] = (),
) -> StepFacts:
    """Record ``seq`` as a part of a full record sent in parts (the first is ``full``),
    naming waiting requests ``names``, ``to_come`` of the requests still to be named."""
    named = [request(n, WAITING) for n in names]
    facts = record(seq, *named, full=full, finished=finished, ended=ended)
    return msgspec.structs.replace(facts, to_come=to_come)


class Server:
    """One engine core's publisher at ``address`` (``ipc://`` in a test's folder)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.publisher: FactsPublisher | None = FactsPublisher(address)

    def wait_subscribed(self, timeout: float = 30.0) -> None:
        """Until a watch subscribed. The deadline only guards a broken link: a restarted
        server is found at zmq's reconnect backoff (up to a second a try), which a loaded
        machine stretches (5 s ran out once beside three test workers)."""
        publisher = self.publisher
        assert publisher is not None
        deadline = time.monotonic() + timeout
        while not publisher.wanted():
            assert time.monotonic() < deadline, "nobody subscribed"
            time.sleep(0.01)  # polling: wanted() reads the subscriptions that came

    def send(self, *records: StepFacts) -> None:
        publisher = self.publisher
        assert publisher is not None
        for facts in records:
            publisher.deliver(facts)

    @contextmanager
    def stepping(self) -> Iterator[None]:
        """While inside, read subscriptions as a stepping engine core does (each step): the
        plug-in answers a watch's questions to its log of ends (and sees a resubscription) only
        when it reads them, and a watch holds the full record after a gap for that answer."""
        publisher = self.publisher
        assert publisher is not None
        done = threading.Event()

        def step() -> None:
            while not done.wait(0.01):
                publisher.wanted()

        thread = threading.Thread(target=step, name="core-steps", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def kill(self) -> None:
        publisher, self.publisher = self.publisher, None
        if publisher is not None:
            publisher.close()

    def restart(self) -> None:
        self.kill()
        self.publisher = FactsPublisher(self.address)


def warm_up(engine: Engine, seen: Callable[[str, float], bool], tries: int = 20) -> None:
    """Run one-token requests ``warm-up-N`` on ``engine`` (its core in a process of its own,
    publishing) until ``seen(request_id, timeout)`` says a watcher read one to its end.

    A core reads new subscriptions only when it steps, and sends a record only to those it
    has read: from a request seen whole on, every record reaches the watcher, without
    guessing how long a subscription takes to get there. Each try waits a second longer than
    the one before: a watcher that lags (a busy machine) still sees one, only later.
    """
    for i in range(tries):
        request_id = f"warm-up-{i}"
        engine.add_request(request_id, "x", SamplingSpec(temperature=0.0, max_tokens=1))
        while engine.has_unfinished():
            engine.step()
        if seen(request_id, 2.0 + i):  # if not, it went before the subscription: again
            return
    raise AssertionError(f"none of {tries} requests reached the watcher")


def ipc_address(folder: Path, name: str = "facts.sock") -> str:
    return f"ipc://{folder / name}"


def next_step(engine: AttachedEngine, timeout: float = 5.0) -> StepResult:
    """The engine's next step, once it has one to report (waits for the record to arrive)."""
    deadline = time.monotonic() + timeout
    while not engine.has_unfinished():
        assert time.monotonic() < deadline, "no step to report"
        time.sleep(0.005)
    return engine.step()


def wait_until(condition: object, timeout: float = 5.0) -> None:
    """Poll ``condition()`` (a callable) until it is true."""
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.01)


class Clock:
    """Wall-clock seconds that move only when a test says so (for the settling rule)."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def wait_link(engine: AttachedEngine, state: EngineState) -> None:
    """Poll the engine (as the driver's loop does) until its link is in ``state``."""

    def reached() -> bool:
        engine.has_unfinished()
        return engine.link().state is state

    wait_until(reached)


class Watcher:
    """The driver's bookkeeping over an attached engine, one step at a time."""

    def __init__(self, engine: AttachedEngine) -> None:
        self.engine = engine
        self.now = 0.0
        self.ledger = RequestLedger(lambda: self.now)

    def step(self) -> StepResult:
        result = next_step(self.engine)
        self.now += 0.01
        self.ledger.apply(result, self.now)
        return result

    def active(self) -> dict[str, RequestView]:
        return {v.request_id: v for v in self.ledger.active()}

    def finished(self) -> dict[str, RequestView]:
        return {v.request_id: v for v in self.ledger.finished()}


def result_ids(path: Path) -> list[str]:
    """The ids in a results file a watch is writing: its whole lines only (the last one may
    be half written as it is read, and a half line is no result yet)."""
    text = path.read_text() if path.exists() else ""
    return [json.loads(line)["id"] for line in text[: text.rfind("\n") + 1].splitlines()]


def watch_command(address: str, folder: Path) -> list[str]:
    """``stepview --attach ADDRESS --headless --json`` as a child process runs it."""
    log = str(folder / "stepview.log")
    return [
        sys.executable,
        "-m",
        "stepview",
        "--attach",
        address,
        "--headless",
        "--json",
        "--log-file",
        log,
    ]


class Lines:
    """A child's stream read line by line on a thread, so waits can time out."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._ended = threading.Event()  # the stream's end was read: every line is queued
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                self._queue.put(line.rstrip("\n"))
        finally:
            self._ended.set()

    def wait_for(self, text: str, timeout: float = 15.0) -> str:
        """The first line (seen before or coming) that contains ``text``."""
        return self.wait_until(lambda line: text in line, timeout, f"no line with {text!r}")

    def wait_until(
        self,
        wanted: Callable[[str], bool],
        timeout: float = 15.0,
        what: str = "no such line",
        since: int = 0,
    ) -> str:
        """The first line (seen before, from line ``since`` on, or coming) that is ``wanted``."""
        for line in self.seen[since:]:
            if wanted(line):
                return line
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{what} in {self.seen}"
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(line)
            if wanted(line):
                return line

    def rest(self, timeout: float = 15.0) -> list[str]:
        """Every line, once the stream has ended (the child exited); a stream still open
        after ``timeout`` (a failing test's message) gives the lines so far."""
        self._ended.wait(timeout)
        while True:
            try:
                self.seen.append(self._queue.get_nowait())
            except queue.Empty:
                return self.seen


class Watch:
    """A ``stepview --attach --headless`` child process and its two streams, line by line."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.child = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
            # Ctrl+C is part of what is tested: a run started as a background job would
            # inherit SIGINT ignored (and stepview keeps an ignored signal ignored).
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        assert self.child.stdout is not None and self.child.stderr is not None
        self.out, self.err = Lines(self.child.stdout), Lines(self.child.stderr)


EXIT_S = 60.0
"""How long a watch may take to end once told to (or once its reader is gone): a niced watch
on a busy machine is slow to go."""


@contextmanager
def watching(command: list[str], env: dict[str, str] | None = None) -> Iterator[Watch]:
    """Run ``command`` (see :func:`watch_command`); killed on the way out if still running."""
    watch = Watch(command, env)
    try:
        yield watch
    finally:
        if watch.child.poll() is None:
            watch.child.kill()
            watch.child.wait(10)


def round_of(
    watch: Watch,
    addresses: set[str],
    each: Callable[[dict[str, Any]], bool] = lambda record: True,
    timeout: float = 15.0,
    since: int = 0,
) -> dict[str, dict[str, Any]]:
    """The records of the first round of fleet lines (from line ``since`` on) that is of
    ``addresses`` exactly, and whose every record is as ``each`` wants, by address (the lines
    of a round share their ``time``)."""
    rounds: dict[float, dict[str, dict[str, Any]]] = {}

    def full(text: str) -> bool:
        record = json.loads(text)
        found = rounds.setdefault(record["time"], {})
        found[record["address"]] = record
        return set(found) == addresses and all(each(r) for r in found.values())

    line = watch.out.wait_until(full, timeout, since=since)
    return rounds[json.loads(line)["time"]]


ANSWER = {
    "choices": [
        {
            "index": 0,
            "text": " world!",
            "token_ids": [7, 8, 9],
            "prompt_token_ids": [1, 2],
            "finish_reason": "length",
            "stop_reason": None,
        }
    ]
}
"""The completions endpoint's answer to a prompt of two tokens, three generated."""
