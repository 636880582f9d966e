"""Soak: an attached headless watch fed a million requests, and its memory as they pass.

``stepview --attach ADDRESS --headless --json`` is what a team leaves running beside a
server for weeks; its memory must follow its configuration (``--keep-finished``, the
sketch, the bounded alerts and timelines), never how many requests it has seen. Here a
synthetic engine core publishes, with the plug-in's own publisher and wire format
(:mod:`stepview.engine.plugin.publisher`, records of change, a full record to every new
subscriber), requests of realistic size: prompts and completions of 100 to 300 tokens,
256 running at a time, 1 in 40 preempted once and recomputed, a queue that never empties.
Each step gives every running request up to ``--tokens-per-step`` tokens (8: as speculative
decoding would), which changes how many steps a million requests take, not what the watch
keeps. It publishes as fast as the watch takes them: never more than ``LEAD`` requests
ahead of what the watch has printed (a record dropped past zmq's high-water mark would only
make the watch resynchronise, as it does with a real server).

The watch's RSS (psutil) is printed when it has printed 1 %, 10 % and all of the requests;
the last line is ``watch_memory: rss_mb_10k=A rss_mb_100k=B rss_mb_1m=C`` for the default
million (labels follow ``--requests``; ``--quick``: 500, a smoke test). Every request
must be in the watch's results file, and the watch must exit 0 on Ctrl+C. Target (issue 18):
C <= 400 MB and C <= 1.10 x B. The results file (3 KB a request) goes to a temporary folder,
removed at the end.
"""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from stepview.engine.plugin.publisher import FactsPublisher
from stepview.engine.records.facts import (
    CoreState,
    EndedFacts,
    RequestFacts,
    RequestIntro,
    StepFacts,
)

RUNNING_MAX = 256
WAITING_MIN = 64  # the queue never empties: new requests keep arriving behind it
BLOCK = 16
KV_BLOCKS = 8192
LEAD = 2000  # requests published ahead of what the watch has printed, at most
PREEMPT_ONE_IN = 40
WAITING, RUNNING, PREEMPTED = (
    int(CoreState.WAITING),
    int(CoreState.RUNNING),
    int(CoreState.PREEMPTED),
)


@dataclass
class Held:
    """One request the synthetic core holds."""

    req_id: str
    prompt: list[int]
    target: int  # output tokens it will generate
    arrival: float
    state: int = WAITING
    outputs: list[int] = field(default_factory=list)
    computed: int = 0
    preemptions: int = 0
    sent: int = 0  # outputs already published
    introduced: bool = False
    will_preempt: bool = False

    def facts(self, scheduled: int) -> RequestFacts:
        intro = None
        if not self.introduced:
            intro = RequestIntro(self.prompt, temperature=0.0, seed=1, ignore_eos=True)
            self.introduced = True
        new, self.sent = self.outputs[self.sent :], len(self.outputs)
        blocks = -(-self.computed // BLOCK)
        return RequestFacts(
            self.req_id, self.state, len(self.prompt), self.computed, len(self.outputs),
            self.preemptions, scheduled, blocks, 0, self.arrival, 0, self.target,
            new_token_ids=new, intro=intro,
        )  # fmt: skip


class SyntheticCore:
    """Steps a queue of requests the way vLLM's scheduler would, as records of change."""

    def __init__(self, total: int, tokens_per_step: int, seed: int = 0) -> None:
        self.total = total
        self.per_step = tokens_per_step
        self.random = random.Random(seed)
        self.vocabulary = [self.random.randrange(49152) for _ in range(4096)]
        self.made = 0
        self.finished = 0
        self.step = 0
        self.seq = 0
        self.started = time.time()
        self.waiting: list[Held] = []
        self.running: list[Held] = []

    def _new(self) -> Held:
        start = self.random.randrange(len(self.vocabulary) - 300)
        prompt = self.vocabulary[start : start + self.random.randint(100, 300)]
        held = Held(f"soak-{self.made}-{self.made % 2**32:08x}", prompt, 0, time.time())
        held.target = self.random.randint(100, 300)
        held.will_preempt = self.made % PREEMPT_ONE_IN == 0
        self.made += 1
        return held

    def next_record(self, full: bool) -> StepFacts:
        """One step: admit from the head of the queue, decode, finish, preempt, arrive."""
        self.step += 1
        self.seq += 1
        changed: dict[str, tuple[Held, int]] = {}
        prefill = decode = 0
        while len(self.running) < RUNNING_MAX and self.waiting:
            held = self.waiting.pop(0)
            held.state = RUNNING
            todo = len(held.prompt) + len(held.outputs) - held.computed
            held.computed += todo
            prefill += todo
            held.outputs.append(self.vocabulary[self.step % len(self.vocabulary)])
            self.running.append(held)
            changed[held.req_id] = (held, todo)
        ended: list[EndedFacts] = []
        still: list[Held] = []
        for held in self.running:
            if held.req_id not in changed:
                n = min(self.per_step, held.target - len(held.outputs))
                at = held.computed % 4000
                held.outputs.extend(self.vocabulary[at : at + n])
                held.computed += n
                decode += n
                changed[held.req_id] = (held, n)
            if len(held.outputs) >= held.target:
                ended.append(EndedFacts(held.req_id, len(held.outputs), held.outputs, "length"))
                del changed[held.req_id]
            else:
                still.append(held)
        self.running = still
        preempted: list[str] = []
        victim = next((h for h in reversed(self.running) if h.will_preempt and h.outputs), None)
        if victim is not None and len(victim.outputs) > victim.target // 2:
            self.running.remove(victim)
            victim.will_preempt = False
            victim.state, victim.computed = PREEMPTED, 0
            victim.preemptions += 1
            self.waiting.insert(0, victim)  # vLLM puts it back at the head of the queue
            preempted.append(victim.req_id)
            changed[victim.req_id] = (victim, 0)
        while len(self.waiting) < WAITING_MIN and self.made < self.total:
            held = self._new()
            self.waiting.append(held)
            changed[held.req_id] = (held, 0)
        self.finished += len(ended)
        if full:  # a new subscriber: every request the core holds, whole
            for held in (*self.running, *self.waiting):
                held.introduced, held.sent = False, 0
                changed.setdefault(held.req_id, (held, 0))
        requests = [held.facts(scheduled) for held, scheduled in changed.values()]
        used = sum(-(-h.computed // BLOCK) for h in self.running)
        return StepFacts(
            self.step, self.step, time.time(), self.started, 0, self.seq, full,
            8192, prefill, decode, RUNNING_MAX, len(self.running), len(self.waiting),
            KV_BLOCKS - used, KV_BLOCKS, BLOCK, preempted, [e.req_id for e in ended],
            requests, not self.running and not self.waiting, ended,
            self.waiting[0].req_id if self.waiting else None,
        )  # fmt: skip


class Printed:
    """How many lines (finished requests) the watch has printed, counted on a thread."""

    def __init__(self, stream: object) -> None:
        self.count = 0
        self._stream = stream
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for _ in self._stream:  # type: ignore[attr-defined]
            self.count += 1


def label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def rss_mb(process: psutil.Process) -> float:
    return process.memory_info().rss / 2**20


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--tokens-per-step", type=int, default=8)
    # 500: still more than RUNNING_MAX, so a queue waits behind a full batch, in ~2 s.
    parser.add_argument("--quick", action="store_true", help="500 requests: a smoke test")
    args = parser.parse_args(argv)
    total = 500 if args.quick else args.requests
    marks = [total // 100, total // 10, total]
    with tempfile.TemporaryDirectory(prefix="stepview-soak-") as tmp:
        folder = Path(tmp)
        address = f"ipc://{folder / 'facts.sock'}"
        publisher = FactsPublisher(address)
        command = [
            *(sys.executable, "-m", "stepview", "--attach", address, "--headless", "--json"),
            *("--results", str(folder / "results.jsonl"), "--log-file", str(folder / "log")),
        ]
        watch = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        process = psutil.Process(watch.pid)
        printed = Printed(watch.stdout)
        try:
            while not publisher.wanted():
                if watch.poll() is not None:
                    raise SystemExit(f"the watch exited ({watch.returncode}); log: {folder}/log")
                time.sleep(0.01)
            core = SyntheticCore(total, args.tokens_per_step)
            figures: dict[int, float] = {}
            began = time.monotonic()
            last_report = began
            while marks[len(figures) :]:
                mark = marks[len(figures)]
                if printed.count >= mark:
                    figures[mark] = rss_mb(process)
                    took = time.monotonic() - began
                    print(
                        f"{printed.count:>9} requests  rss {figures[mark]:7.1f} MB  {took:7.0f} s"
                    )
                    continue
                if watch.poll() is not None:
                    raise SystemExit(f"the watch exited ({watch.returncode}) at {printed.count}")
                if core.finished - printed.count > LEAD or core.finished >= total:
                    time.sleep(0.002)
                    continue
                publisher.wanted()  # reads (re)subscriptions: a resync asks for a full record
                full, publisher.fresh = publisher.fresh or core.seq == 0, False
                publisher.deliver(core.next_record(full))
                now = time.monotonic()
                if now - last_report > 30:
                    last_report = now
                    rate = printed.count / (now - began)
                    print(
                        f"  ... {printed.count} requests, {rate:.0f}/s, "
                        f"rss {rss_mb(process):.1f} MB"
                    )
            watch.send_signal(signal.SIGINT)
            code = watch.wait(60)
            with (folder / "results.jsonl").open("rb") as results:
                saved = sum(1 for _ in results)
            print(f"exit code {code}; {saved} requests in the results file")
        finally:
            if watch.poll() is None:
                watch.kill()
                watch.wait(10)
            publisher.close()
    if code != 0 or saved != total:
        raise SystemExit(f"the watch exited with {code}, {saved} of {total} requests saved")
    a, b, c = (figures[m] for m in marks)
    print(
        f"watch_memory: rss_mb_{label(marks[0])}={a:.1f} rss_mb_{label(marks[1])}={b:.1f} "
        f"rss_mb_{label(marks[2])}={c:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
