"""``capture_cost``'s attach figure: what one engine-core step grows by when a watch joins.

A watch attaches to a busy server, or reconnects to it, during an incident: exactly when the
server holds the most requests. The plug-in then owes the new subscriber a full record (every
request the core holds, each with its intro and its output so far), and whatever of it is
built in one step is that step's delay. This runs after ``capture_cost``'s own run, on the
same engine: ``requests`` requests added at once (``max_num_seqs`` run, the rest wait), the
plug-in's sink made a server's (the publisher alone, its log of ends its own: a subscription
marks the next record fresh, and nothing in the process keeps the records), a few steps to
see what the plug-in's work per step is while one watch listens, then a second watch
subscribes and reads the records until it holds the whole picture, then it asks for a fresh
one (a resync: what a watch that lost records, or whose link came back, does) and reads that
one too.

Python's garbage collector runs wherever allocation triggers it: a collection of its middle
generation took 1-3 ms here at 8 192 held, in vLLM's step or in the plug-in's alike, watch or
no watch. The figure leaves out the collections that ran inside the plug-in's calls (timed
apart with ``gc.callbacks``) and the line gives it with them too: the most a step grew with
its collections in, and how many ran in the plug-in's code over both pictures.

The figure is the plug-in's own work in a step (:meth:`CoreCapture.capture` and
:meth:`FactsPublisher.deliver`: building, encoding and sending the records), in the
scheduling thread's CPU time (``time.thread_time_ns``: the machine is shared, and another
process taking the CPU in the middle of a step is no work of the plug-in's): the most one
step of either picture took beyond the median of the steps before the watch came. The rest of
the step (vLLM's scheduling and model) does not change when a watch subscribes. It also says
how many steps the pictures took and whether the watch's picture named every request held
(those that left meanwhile said so in the records).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from benchmarks.workload import workload

WARM_STEPS = 8  # steps with one watch listening, before the second subscribes
ATTACH_MAX_TOKENS = 256  # the attaching requests' (with their prompts, within 512)
MAX_STEPS = 20_000  # a picture that takes longer is reported as not done


class _PluginClock:
    """The scheduling thread's CPU time in the plug-in's calls, and in the garbage collections
    that ran inside them (``gc.callbacks``), summed since the last :meth:`take`."""

    def __init__(self) -> None:
        self._inside = False
        self._work = self._gc = self._gc_start = self.collections = 0
        self._restore: list[Callable[[], None]] = []
        gc.callbacks.append(self._collecting)

    def _collecting(self, phase: str, info: dict[str, Any]) -> None:
        if self._inside:
            if phase == "start":
                self._gc_start = time.thread_time_ns()
            else:
                self._gc += time.thread_time_ns() - self._gc_start
                self.collections += 1

    def time(self, cls: Any, name: str) -> None:
        """Count the CPU time of ``cls.name`` from now until :meth:`close`."""
        original = getattr(cls, name)
        clock = time.thread_time_ns

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            self._inside = True
            try:
                return original(*args, **kwargs)
            finally:
                self._inside = False
                self._work += clock() - start

        setattr(cls, name, wrapper)
        self._restore.append(lambda: setattr(cls, name, original))

    def take(self) -> tuple[int, int]:
        """(work, of which garbage collection) since the last call, ns."""
        taken = (self._work, self._gc)
        self._work = self._gc = 0
        return taken

    def close(self) -> None:
        gc.callbacks.remove(self._collecting)
        for put_back in self._restore:
            put_back()


def attach_figures(
    engine: Any, publisher: Any, address: str, requests: int, max_tokens: int
) -> dict[str, Any]:
    """The attach figures of one size, on ``engine`` (idle; its core in this process) whose
    plug-in publishes through ``publisher`` at ``address``."""
    from stepview.engine.plugin.capture import CoreCapture
    from stepview.engine.plugin.publisher import FactsPublisher
    from stepview.engine.records.channel import FactsSubscriber
    from stepview.engine.records.stream import RecordStream

    scheduler = engine.llm_engine.engine_core.engine_core.scheduler
    capture = scheduler._stepview
    listener = capture.sink
    clock = _PluginClock()
    clock.time(CoreCapture, "capture")
    clock.time(FactsPublisher, "deliver")
    ids = [f"attach{i}" for i in range(requests)]
    # Requests that outlive both pictures (aborted once they are taken): with the run's own
    # max_tokens (16 in the smoke test) and the model's end-of-text, the core emptied before
    # the resync's full record now and then, and the picture waited MAX_STEPS for nothing.
    added = [
        (prompt, replace(spec, max_tokens=ATTACH_MAX_TOKENS, ignore_eos=True))
        for prompt, spec in workload(requests, max_tokens, seed=99)  # a seed of its own
    ]
    for request_id, (prompt, spec) in zip(ids, added, strict=True):
        engine.add_request(request_id, prompt, spec)
    capture.sink = publisher  # a server's: stepview's own view gets nothing meanwhile
    watch: Any = None
    try:

        def step() -> tuple[int, int]:
            """One engine step; the plug-in's CPU work in it, and its GC (ns)."""
            clock.take()
            engine.step()
            return clock.take()

        warm = [step() for _ in range(WARM_STEPS)]
        usual = statistics.median(work - gc_ns for work, gc_ns in warm)
        collections = clock.collections
        watch = FactsSubscriber(address)
        if not watch.wait_connected(10):
            raise SystemExit("capture_cost: the attaching watch did not connect")
        stream = RecordStream(watch.resync)
        pictures = []
        for resync in (False, True):
            if resync:
                watch.resync()
            pictures.append(_picture(scheduler, step, watch, stream))
    finally:
        capture.sink = listener
        clock.close()
        if watch is not None:
            watch.close()
        engine.abort(ids)
        while engine.has_unfinished():
            engine.step()
    steps = [step for picture, _, _ in pictures for step in picture]
    return {
        "attach_ms": max(0, max(work - gc_ns for work, gc_ns in steps) - usual) / 1e6,
        "attach_gc_ms": max(0, max(work for work, _ in steps) - usual) / 1e6,
        "attach_collections": clock.collections - collections,
        "attach_usual_us": usual / 1000,
        "attach_steps": [len(steps) for steps, _, _ in pictures],
        "attach_seen": [seen for _, seen, _ in pictures],
        "attach_held": [held for _, _, held in pictures],
    }


def _picture(
    scheduler: Any, step: Callable[[], tuple[int, int]], watch: Any, stream: Any
) -> tuple[list[tuple[int, int]], int, int]:
    """Step until the watch holds a whole picture: the plug-in's work in each step since it
    subscribed, how many of the requests held then the picture named or saw leave, of how
    many."""
    held = set(scheduler.requests)  # the picture's due: what the core holds now
    left: set[str] = set()
    steps: list[tuple[int, int]] = []
    while len(steps) < MAX_STEPS:
        steps.append(step())
        for facts in watch.poll():
            left.update(facts.finished)
            whole = stream.take(facts)
            if whole is not None and whole.full:
                named = {req.req_id for req in whole.requests}
                return steps, len(held & (named | left)), len(held)
    return steps, 0, len(held)


def attach_line(rows: Sequence[dict[str, Any]]) -> str:
    """The report's line on attaching, one entry per size."""
    return "a watch joining mid-run (plug-in CPU per step, beyond the usual): " + ", ".join(
        f"{row['requests']}: +{row['attach_ms']:.2f} ms at most ({row['attach_gc_ms']:.2f} with "
        f"the {row['attach_collections']} GC collections that ran in it; usual "
        f"{row['attach_usual_us']:.0f} us; pictures in {'+'.join(map(str, row['attach_steps']))}"
        f" steps, named {'+'.join(map(str, row['attach_seen']))} of "
        f"{'+'.join(map(str, row['attach_held']))} held)"
        for row in rows
    )
