"""The engine core's thread stacks, written from inside it when it hangs or is asked.

A core stuck in a step (a kernel that never returns, a collective waiting for a peer, a lock)
answers nothing, and attaching a debugger needs ptrace rights a container seldom grants. The
plug-in runs inside the core, so it has Python's ``faulthandler`` write every thread's stack,
three ways, none of which costs a step anything:

* **asked**: with ``STEPVIEW_STACKS_DIR`` set (stepview sets it for its own core),
  ``faulthandler.register`` makes :data:`~stepview.engine.records.stacks.STACKS_SIGNAL` write
  them to a file there: a C handler, no GIL needed, so it answers even while the step thread
  holds the GIL in native code; only a core stopped whole (``kill -STOP``) does not.
* **hung step**: a thread of the plug-in, :class:`StackWatch`, wakes every half second and
  reads the capture's step counter (which every ``schedule()`` moves already); when the core
  has requests, is not paused, and the counter has not moved for ``STEPVIEW_STACKS_AFTER_S``,
  it writes the stacks itself, once per hang, and a watched server sends them to its watches.
* **watchdog**: a core stuck holding the GIL keeps that thread from running too, so while
  the core is busy the thread keeps faulthandler's C watchdog armed
  (``dump_traceback_later``), re-arming it every few seconds: if the thread cannot, the
  watchdog writes the stacks once the core has been stuck that long.

Why not arm the watchdog around each step, the obvious design: ``dump_traceback_later``
starts a thread each time, and its cancel waits, holding the GIL, until the OS has run that
thread to its end: 185 us a pair in a tight loop on this 2-core machine, 73 to 1 100 us a
step in a run, up to 25 times what the whole capture of a step costs (``python -m benchmarks
capture_cost`` prints both). Here a step pays nothing at all: the counter was there, and the
watch's work is twice a second, not per step (3 to 14 us a step spread over a run: the
benchmark prints that too).

A watch asks a server's core for its stacks on the channel (an XPUB subscription, read here
under the publisher's lock): the answer goes out on the stacks topic from this thread, so the
step thread need not run. While the core is idle, the same wake takes the scheduling thread's
part for the watches (``idle``: :meth:`~stepview.engine.plugin.capture.CoreCapture.while_idle`).
The files, the topic and the wire are :mod:`stepview.engine.records.stacks`.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from stepview.engine.records import stacks as files
from stepview.engine.records.stacks import StacksWire
from stepview.model.stacks import ASKED, HUNG_STEP, WATCHDOG

log = logging.getLogger("stepview.engine.plugin")

WAKE_S = 0.5
"""How often the watch reads the step counter: a hang is noticed this much late at most."""


def dump_all_threads() -> str:
    """Every thread's stack, in faulthandler's format (from Python: the GIL must be free)."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as out:  # faulthandler wants an fd
        faulthandler.dump_traceback(out, all_threads=True)
        out.seek(0)
        return out.read()


def thread_names() -> dict[int, str]:
    return {t.ident: t.name for t in threading.enumerate() if t.ident is not None}


class StackWatch:
    """The plug-in's stack writer for one engine core (see the module docstring).

    ``counter()`` is the capture's step count; ``busy()`` whether the core has requests and
    is not paused (read from this thread: plain reads of the scheduler, atomic under the GIL);
    ``publisher`` (a server's) sends stacks to watches and passes their asks on; ``rank``,
    ``started`` say which core. ``folder`` is ``STEPVIEW_STACKS_DIR`` (with the signal
    answered), or ``None``: a private temporary folder, removed at :meth:`close`. ``idle()``
    runs at each wake while the core is not busy (the capture's turn for the watches).
    """

    def __init__(
        self,
        counter: Callable[[], int],
        busy: Callable[[], bool],
        *,
        publisher: Any = None,
        folder: Path | None = None,
        after: float = files.STACKS_AFTER_S,
        rank: int = 0,
        started: float = 0.0,
        wake: float = WAKE_S,
        idle: Callable[[], None] | None = None,
    ) -> None:
        self.pid = os.getpid()
        self._counter = counter
        self._busy = busy
        self._publisher = publisher
        self._idle = idle
        self._after = after
        self._wake = wake
        self._rearm = max(1.0, after / 2)
        self._rank = rank
        self._started = started
        self._owned = folder is None
        self.folder = (
            Path(tempfile.mkdtemp(prefix="stepview-stacks-")) if folder is None else folder
        )
        self.step_thread = threading.get_ident()  # built on the thread that runs the steps
        self._asked: IO[bytes] | None = None
        self._watchdog: IO[bytes] | None = None
        self._watchdog_seen = 0  # bytes of the watchdog's file already picked up
        self._armed_at: float | None = None
        self._names = thread_names()
        # The hang being watched: the counter's value, since when, and whether it was written.
        self._last = -1
        self._since = time.monotonic()
        self._written = False
        self.work_ns = 0  # the watch's own CPU time (the benchmark reads it)
        self.wakes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stepview-stacks", daemon=True)

    # -- start and stop ------------------------------------------------------------------------

    def start(self, answer_signal: bool) -> None:
        """Answer the signal (``STEPVIEW_STACKS_DIR`` given), say so, and start watching."""
        if answer_signal:
            self._asked = open(files.asked_file(self.folder, self.pid), "ab")  # noqa: SIM115 - the handler's, closed in close()
            faulthandler.register(
                files.STACKS_SIGNAL, file=self._asked, all_threads=True, chain=False
            )
        self._write_ready()
        if self._after > 0 or self._publisher is not None:
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2 * self._wake + 1)
        if self._armed_at is not None:
            faulthandler.cancel_dump_traceback_later()
        if self._asked is not None:
            faulthandler.unregister(files.STACKS_SIGNAL)
        for handle in (self._asked, self._watchdog):
            if handle is not None:
                handle.close()
        if self._owned:
            shutil.rmtree(self.folder, ignore_errors=True)
        else:
            files.ready_file(self.folder, self.pid).unlink(missing_ok=True)

    def _write_ready(self) -> None:
        files.write_json(
            files.ready_file(self.folder, self.pid),
            {
                "pid": self.pid,
                "rank": self._rank,
                "signal": int(files.STACKS_SIGNAL) if self._asked is not None else None,
                "step_thread": self.step_thread,
                "names": {str(ident): name for ident, name in self._names.items()},
                "after": self._after,
            },
        )

    # -- the watch -----------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(self._wake):
            began = time.thread_time_ns()
            try:
                self.tick(time.monotonic())
            except Exception:  # never into vLLM: the core runs on without the watch
                log.exception("stepview: the stack watch stopped")
                return
            finally:
                self.work_ns += time.thread_time_ns() - began
                self.wakes += 1

    def tick(self, now: float) -> None:
        """One wake: follow the counter, keep the watchdog armed while busy, write the stacks
        of a hung step once, pass on what the watchdog wrote, answer asks."""
        count = self._counter()
        busy = bool(self._busy())
        if count != self._last or not busy:
            self._last, self._since, self._written = count, now, False
        if self._after > 0:
            self._keep_watchdog(busy, now)
            if busy and not self._written and now - self._since >= self._after:
                self._written = True
                self._hung(now - self._since)
            self._pick_watchdog()
        publisher = self._publisher
        if publisher is not None:
            asks = publisher.take_asks()
            if asks:
                self._send(ASKED, dump_all_threads(), "", asks)
        if not busy and self._idle is not None:
            self._idle()
        if threading.active_count() != len(self._names):
            self._names = thread_names()
            self._write_ready()

    def _keep_watchdog(self, busy: bool, now: float) -> None:
        """Armed while busy, re-armed every ``rearm`` s, so it fires only when this thread
        could not run for ``after`` s or more; cancelled while idle (an idle core waits for
        work in a queue, which is no hang)."""
        if busy:
            if self._armed_at is None or now - self._armed_at >= self._rearm:
                if self._watchdog is None:
                    path = files.watchdog_file(self.folder, self.pid)
                    self._watchdog = open(path, "ab")  # noqa: SIM115 - the watchdog's, closed in close()
                faulthandler.dump_traceback_later(
                    self._after + self._rearm, repeat=False, file=self._watchdog, exit=False
                )
                self._armed_at = now
        elif self._armed_at is not None:
            faulthandler.cancel_dump_traceback_later()
            self._armed_at = None

    def _hung(self, waited: float) -> None:
        """Write the stacks of a step that has not ended for ``waited`` s."""
        note = f"no step had ended for {waited:.0f} s (the plug-in's watch wrote them)"
        text = dump_all_threads()
        record = files.hung_record(time.time(), note, text)
        path = files.hung_file(self.folder, self.pid)
        files.write_json(path, record)
        log.warning("stepview: engine core stuck in a step for %.0f s; stacks in %s", waited, path)
        self._send(HUNG_STEP, text, note, [])

    def _pick_watchdog(self) -> None:
        """What the watchdog wrote while this thread could not run, sent once it can."""
        if self._watchdog is None:
            return
        size = os.fstat(self._watchdog.fileno()).st_size
        if size <= self._watchdog_seen:
            return
        path = files.watchdog_file(self.folder, self.pid)
        with open(path, "rb") as written:
            written.seek(self._watchdog_seen)
            text = written.read().decode("utf-8", "replace")
        self._watchdog_seen = size
        note = "written by faulthandler's watchdog: the core held the GIL, nothing else could run"
        self._send(WATCHDOG, text, note, [])

    def _send(self, how: str, text: str, note: str, answers: list[str]) -> None:
        publisher = self._publisher
        if publisher is None:
            return
        wire = StacksWire(
            self.pid,
            self._rank,
            time.time(),
            how,
            text,
            note,
            dict(self._names),
            self.step_thread,
            answers,
            self._started,
        )
        publisher.send_stacks(wire)


def core_busy(scheduler: Any) -> Callable[[], bool]:
    """Whether the core has requests and is not paused (vLLM's pause: stepview's ``p`` on its
    own core), read from the watch's thread: plain attribute reads, atomic under the GIL."""

    def busy() -> bool:
        if not scheduler.requests:
            return False
        state = getattr(scheduler, "pause_state", None)
        return state is None or getattr(state, "name", "UNPAUSED") == "UNPAUSED"

    return busy


def watch_stacks(scheduler: Any, capture: Any, sink: Any, local: bool) -> StackWatch | None:
    """The watch for the core ``scheduler`` runs in; ``None`` in stepview's own process
    (``local``: stepview dumps its own threads there), and where no one could get the stacks
    (neither a publisher nor ``STEPVIEW_STACKS_DIR``: a scheduler built for a check, a server
    not publishing). Never raises into vLLM."""
    if local:
        return None
    try:
        folder_name = os.environ.get(files.STACKS_DIR_ENV)
        folder = Path(folder_name) if folder_name else None
        after = files.stacks_after()
        publisher = sink if hasattr(sink, "take_asks") else None
        if folder is None and publisher is None:
            return None
        watch = StackWatch(
            lambda: capture.step,
            core_busy(scheduler),
            publisher=publisher,
            folder=folder,
            after=after,
            rank=capture.rank,
            started=capture.started,
            idle=None if publisher is None else lambda: capture.while_idle(scheduler),
        )
        watch.start(answer_signal=folder is not None)
        log.info("stepview: engine core %d writes its stacks in %s", watch.pid, watch.folder)
        return watch
    except Exception as exc:
        log.error("stepview: no engine core stacks (%s); vLLM runs on", exc)
        return None
