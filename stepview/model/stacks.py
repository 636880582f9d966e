"""An engine core's thread stacks at one moment, as a flight recording keeps them.

When an engine core stops answering, what its threads were doing is the first thing anyone
asks, and a Python debugger needs ptrace rights a container seldom grants. The scheduler
plug-in runs inside the core, so it has Python's ``faulthandler`` write every thread's stack
instead: from a C signal handler or a C watchdog thread, without the GIL, even while the core
is stuck in native code (see :mod:`stepview.engine.plugin.stacks`). What it writes is text in
faulthandler's format, and this module is the one reader of it::

    Timeout (0:00:15)!                                  (the watchdog's dumps only)
    Thread 0x00007f3a2b7fe640 (most recent call first):
      File "/venv/lib/python3.11/threading.py", line 320 in wait
      ...

    Current thread 0x00007f3a3c9e4740 (most recent call first):
      File "/venv/.../vllm/v1/engine/core.py", line 668 in step

A :class:`CoreStacks` keeps that text as it was written (nothing is lost to a reader that
misses a detail) with what the text cannot say: which core, when, how it was taken, the names
of the threads and which of them runs the core's steps; or, when there are no stacks at all,
why not (a core stopped with ``kill -STOP`` runs no handler, a watched one may not answer).
:func:`parse_dump` reads the text into threads and frames, leniently: a line it does not know
is kept aside, never an error. Plain data: no vLLM, no Textual.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

# CoreStacks.how: how the stacks were taken.
ASKED: Final = "asked"  # the core's signal handler, when a recording was written
HUNG_STEP: Final = "hung step"  # the plug-in's watch: no step ended for a while, GIL free
WATCHDOG: Final = "watchdog"  # faulthandler's C watchdog: the watch itself could not run
IN_PROCESS: Final = "in process"  # the core runs in stepview's own process
NONE: Final = "none"  # no stacks: see CoreStacks.why_none

_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(.*)\(most recent call first\):$")
_STACK = re.compile(r"^Stack \(most recent call first\):$")  # all_threads=False
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+|\?\?\?) in (.*)$')
_TIMEOUT = re.compile(r"^Timeout \((.*)\)!$")


@dataclass(frozen=True, slots=True)
class StackFrame:
    """One Python frame: ``line`` is 0 where faulthandler did not know it (``???``)."""

    file: str
    line: int
    function: str

    @property
    def where(self) -> str:
        """``schedule (hanging_scheduler.py:41)``: the function, then the file's name."""
        name = self.file.replace("\\", "/").rsplit("/", 1)[-1]
        return f"{self.function} ({name}:{self.line or '?'})"


@dataclass(frozen=True, slots=True)
class ThreadStack:
    """One thread's frames, most recent first, as faulthandler listed them.

    ``thread_id`` is the thread's ident (``threading.get_ident()`` in the core); ``current``
    marks the thread that wrote the dump (a watchdog's or handler's, seldom of interest);
    ``truncated``: faulthandler stops after 100 frames. An empty ``frames`` is a thread that
    was in no Python code (``<no Python frame>``).
    """

    thread_id: int
    current: bool
    frames: tuple[StackFrame, ...]
    truncated: bool = False

    @property
    def top(self) -> StackFrame | None:
        """The frame it was in: where a hung thread hangs."""
        return self.frames[0] if self.frames else None


@dataclass(frozen=True, slots=True)
class StackDump:
    """A dump's text read: its threads in the order written, the watchdog's timeout line if it
    was a watchdog's, lines that were none of these, and whether the thread list was cut
    (faulthandler lists 100 threads at most)."""

    threads: tuple[ThreadStack, ...] = ()
    timeout: str | None = None
    other: tuple[str, ...] = ()
    more_threads: bool = False


def parse_dump(text: str) -> StackDump:
    """Read one faulthandler dump (``text`` as written); only the last dump of several.

    A file written to by the watchdog more than once holds several dumps, each opening with
    its ``Timeout`` line: the last is the latest state, and the one read.
    """
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _TIMEOUT.match(line)]
    if len(starts) > 1:
        lines = lines[starts[-1] :]
    threads: list[ThreadStack] = []
    other: list[str] = []
    timeout: str | None = None
    more = False
    thread: tuple[int, bool] | None = None
    frames: list[StackFrame] = []
    truncated = False

    def close() -> None:
        if thread is not None:
            threads.append(ThreadStack(thread[0], thread[1], tuple(frames), truncated))

    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        frame = _FRAME.match(line)
        if frame is not None and thread is not None:
            number = frame.group(2)
            line_no = int(number) if number.isdigit() else 0
            frames.append(StackFrame(frame.group(1), line_no, frame.group(3)))
            continue
        head = _THREAD.match(line)
        if head is not None or _STACK.match(line):
            close()
            if head is not None:
                thread = (int(head.group(2), 16), head.group(1) == "Current thread")
            else:
                thread = (0, True)  # one thread's dump: the one that wrote it
            frames, truncated = [], False
            continue
        if thread is not None and stripped == "...":
            if line.startswith(" "):
                truncated = True  # past 100 frames
            else:
                more = True  # past 100 threads
            continue
        if thread is not None and stripped == "<no Python frame>":
            continue
        match = _TIMEOUT.match(line)
        if match is not None:
            timeout = match.group(1)
            continue
        other.append(line)
    close()
    return StackDump(tuple(threads), timeout, tuple(other), more)


@dataclass(frozen=True, slots=True)
class CoreStacks:
    """One engine core's stacks at a moment (``text``, faulthandler's), or why there are none.

    ``core`` names the process (``"1234 (VLLM::EngineCore)"``, or a watched core's rank and
    address); ``taken`` is the wall clock when they were written (0.0: unknown); ``how`` one of
    :data:`ASKED`, :data:`HUNG_STEP`, :data:`WATCHDOG`, :data:`IN_PROCESS` or :data:`NONE`;
    ``note`` what a reader should know of them ("no step had ended for 12 s");
    ``names`` the core's thread names by ident, and ``step_thread`` the ident of the thread
    that runs its steps (0: unknown), as the plug-in last saw them.
    """

    core: str
    taken: float
    how: str
    text: str = ""
    why_none: str | None = None
    note: str = ""
    names: Mapping[int, str] = field(default_factory=dict)
    step_thread: int = 0

    def dump(self) -> StackDump:
        return parse_dump(self.text)

    def thread_label(self, thread: ThreadStack) -> str:
        """``Thread 0x7f3a3c9e4740 "MainThread" (runs the engine core's steps)``."""
        name = self.names.get(thread.thread_id)
        parts = [f"Thread {thread.thread_id:#x}"]
        if name:
            parts.append(f'"{name}"')
        if thread.thread_id and thread.thread_id == self.step_thread:
            parts.append("(runs the engine core's steps)")
        elif thread.current and self.how == HUNG_STEP:
            parts.append("(the plug-in's stack watch, which wrote this)")
        return " ".join(parts)

    def step_frame(self) -> StackFrame | None:
        """Where the thread that runs the core's steps is: the frame a hung step hangs in
        (the first thread's, when which one runs the steps is not known)."""
        threads = self.dump().threads
        for thread in threads:
            if thread.thread_id == self.step_thread and self.step_thread:
                return thread.top
        return threads[0].top if threads and not self.step_thread else None


def stacks_record(stacks: CoreStacks) -> dict[str, Any]:
    """A core's stacks as a JSON object (a flight recording's ``stacks`` line holds a list)."""
    record: dict[str, Any] = {"core": stacks.core, "taken": round(stacks.taken, 6)}
    record["how"] = stacks.how
    if stacks.text:
        record["text"] = stacks.text
    if stacks.why_none is not None:
        record["why_none"] = stacks.why_none
    if stacks.note:
        record["note"] = stacks.note
    if stacks.names:
        record["names"] = {f"{ident:#x}": name for ident, name in stacks.names.items()}
    if stacks.step_thread:
        record["step_thread"] = f"{stacks.step_thread:#x}"
    return record


def stacks_from_record(data: Mapping[str, Any]) -> CoreStacks:
    """The inverse of :func:`stacks_record`."""
    names = data.get("names") or {}
    step = data.get("step_thread")
    return CoreStacks(
        core=str(data.get("core", "?")),
        taken=float(data.get("taken") or 0.0),
        how=str(data.get("how", NONE)),
        text=str(data.get("text") or ""),
        why_none=None if data.get("why_none") is None else str(data["why_none"]),
        note=str(data.get("note") or ""),
        names={int(str(ident), 16): str(name) for ident, name in names.items()},
        step_thread=int(str(step), 16) if step else 0,
    )


def stacks_summary(cores: Sequence[CoreStacks]) -> str:
    """One line for a person: where each core's step thread is, or why there are no stacks
    (a core's automatic takes after its answer are left to the recording)."""
    said: list[str] = []
    named: set[str] = set()
    for core in cores:
        if core.core in named:
            continue
        named.add(core.core)
        if core.why_none is not None:
            said.append(f"no engine core stacks of {core.core}: {core.why_none}")
            continue
        frame = core.step_frame()
        where = f"its step thread in {frame.where}" if frame is not None else f"({core.how})"
        said.append(f"engine core stacks of {core.core}: {where}")
    return "; ".join(said)


@dataclass(frozen=True, slots=True)
class RecordedStacks:
    """A flight recording's ``stacks`` line: the cores' stacks taken when a recording was
    written (or extended) for ``kind`` at ``step``."""

    kind: str
    step: int
    cores: tuple[CoreStacks, ...]


def recorded_stacks(line: Mapping[str, Any]) -> RecordedStacks:
    """A ``stacks`` line read (:func:`stacks_record` of each core, under ``cores``)."""
    cores = tuple(stacks_from_record(core) for core in line.get("cores") or ())
    return RecordedStacks(str(line.get("kind", "")), int(line.get("step") or 0), cores)


class StacksProbe(Protocol):
    """Where a flight recorder gets the engine cores' stacks (stepview's own core's, a
    watched server's); called off the driver thread, it may take a second or two."""

    def take(self, since: float) -> Sequence[CoreStacks]:
        """Each core's stacks now, or why not, then those its plug-in wrote by itself since
        ``since`` (wall clock: the start of what the recording holds)."""
