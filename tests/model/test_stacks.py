"""Reading faulthandler's dumps into threads and frames, and keeping a core's stacks as a record.

The dumps are real: written by this interpreter's faulthandler, with a thread parked in a
function of the test's, as the plug-in writes an engine core's. The edge cases faulthandler
writes seldom (a watchdog's file holding several dumps, frames past its limit, a thread in no
Python code, a line it never writes) are given as text.
"""

from __future__ import annotations

import faulthandler
import tempfile
import threading

from stepview.model.stacks import (
    ASKED,
    NONE,
    WATCHDOG,
    CoreStacks,
    parse_dump,
    recorded_stacks,
    stacks_from_record,
    stacks_record,
)


def parked_here(ready: threading.Event, release: threading.Event) -> None:
    ready.set()
    release.wait()


def real_dump() -> tuple[str, int]:
    """Every thread's stack with one thread parked in :func:`parked_here`; its ident."""
    ready, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=parked_here, args=(ready, release), name="parked")
    thread.start()
    try:
        ready.wait()
        with tempfile.TemporaryFile("w+") as out:
            faulthandler.dump_traceback(out, all_threads=True)
            out.seek(0)
            text = out.read()
    finally:
        release.set()
        thread.join()
    assert thread.ident is not None
    return text, thread.ident


def test_a_real_dump_reads_into_threads_with_the_frame_each_is_in() -> None:
    text, parked = real_dump()
    dump = parse_dump(text)
    assert dump.other == () and dump.timeout is None and not dump.more_threads
    by_id = {t.thread_id: t for t in dump.threads}
    assert threading.get_ident() in by_id and parked in by_id
    waiting = by_id[parked]
    assert not waiting.current
    # Most recent first: threading's wait, then the function it was called from.
    assert [f.function for f in waiting.frames[:3]] == ["wait", "wait", "parked_here"]
    assert waiting.frames[2].file == __file__ and waiting.frames[2].line > 0
    assert waiting.top is not None and waiting.top.where.startswith("wait (threading.py:")
    assert by_id[threading.get_ident()].current  # the thread that wrote it


WATCHDOG_TEXT = """\
Timeout (0:00:15)!
Thread 0x00000000000000aa (most recent call first):
  File "/old.py", line 1 in before

Timeout (0:00:15)!
Thread 0x00000000000000bb (most recent call first):
  <no Python frame>

Current thread 0x00000000000000cc (most recent call first):
  File "/venv/lib/python3.11/site-packages/vllm/v1/engine/core.py", line 668 in step
  File "???", line ??? in <lambda>
  ...
...
something else
"""


def test_a_watchdog_file_reads_as_its_last_dump_with_every_limit_noted() -> None:
    dump = parse_dump(WATCHDOG_TEXT)
    assert dump.timeout == "0:00:15"
    assert [t.thread_id for t in dump.threads] == [0xBB, 0xCC]  # the earlier dump left out
    idle, stepping = dump.threads
    assert idle.frames == () and idle.top is None and not idle.current
    assert stepping.current and stepping.truncated
    assert [f.where for f in stepping.frames] == ["step (core.py:668)", "<lambda> (???:?)"]
    assert dump.more_threads and dump.other == ("something else",)


def test_one_threads_dump_and_garbage_read_without_error() -> None:
    one = parse_dump('Stack (most recent call first):\n  File "/a.py", line 3 in f\n')
    assert [(t.thread_id, t.current, t.frames[0].function) for t in one.threads] == [(0, True, "f")]
    garbage = parse_dump('\x00\x01 half a line\n  File "/a.py", line 3 in f\n')
    assert garbage.threads == () and len(garbage.other) == 2


def test_a_cores_stacks_survive_their_record_and_name_the_step_threads_frame() -> None:
    text, parked = real_dump()
    stacks = CoreStacks(
        "1234 (VLLM::EngineCore)",
        1_790_000_000.25,
        ASKED,
        text,
        note="written by the core's SIGUSR2 handler",
        names={parked: "parked", threading.get_ident(): "MainThread"},
        step_thread=parked,
    )
    again = stacks_from_record(stacks_record(stacks))
    assert again == stacks
    frame = again.step_frame()
    assert frame is not None and frame.function == "wait"
    parked_thread = next(t for t in again.dump().threads if t.thread_id == parked)
    label = again.thread_label(parked_thread)
    assert label == f'Thread {parked:#x} "parked" (runs the engine core\'s steps)'


def test_no_stacks_keep_why_and_a_stacks_line_reads_back() -> None:
    why = "the engine core process 1234 (VLLM::EngineCore) is stopped"
    none = CoreStacks("1234 (VLLM::EngineCore)", 5.0, NONE, why_none=why)
    record = stacks_record(none)
    assert "text" not in record and record["why_none"] == why
    watchdog = CoreStacks("1234", 6.0, WATCHDOG, WATCHDOG_TEXT, step_thread=0xCC)
    line = {"k": "stacks", "kind": "signal", "step": 41}
    line["cores"] = [record, stacks_record(watchdog)]
    taken = recorded_stacks(line)
    assert (taken.kind, taken.step) == ("signal", 41)
    assert taken.cores == (none, watchdog)
    assert taken.cores[0].step_frame() is None  # no stacks, no frame
    frame = taken.cores[1].step_frame()
    assert frame is not None and frame.where == "step (core.py:668)"
