"""stepview's own engine core's thread stacks, for a flight recording: asked for, or why not.

The core's plug-in (:mod:`stepview.engine.plugin.stacks`) answers a signal with its stacks,
written by faulthandler's C handler into a folder stepview made and named to it
(``STEPVIEW_STACKS_DIR``, inherited by the core process). :class:`OwnCoreStacks` sends the
signal when a recording is written and reads what came: that works while the core is stuck in
native code holding the GIL, and needs no ptrace rights. It does not work on a core stopped
whole (``kill -STOP``, a debugger): psutil says so, and the recording says why there are no
stacks, with what the plug-in's own watch wrote before (a hung step's stacks). Only a process
of this stepview that said it answers the signal is sent it: the signal's default action
ends a process.

With the core in stepview's own process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``)
:class:`InProcessStacks` writes this process's stacks: the driver thread runs the core's steps.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from stepview.engine.plugin.stacks import dump_all_threads, thread_names
from stepview.engine.records import stacks as files
from stepview.model.stacks import ASKED, HUNG_STEP, IN_PROCESS, NONE, WATCHDOG, CoreStacks

ANSWER_WAIT_S = 2.0
"""How long a core has to write its stacks after the signal: its handler writes at once
(milliseconds for hundreds of frames); a core that has not in this long will not."""
_POLL_S = 0.02
_FOREIGN = "not this stepview's"


class OwnCoreStacks:
    """The stacks of the engine core processes this stepview started (see the module docstring).

    Made before the engine starts: it makes the folder and puts it in the environment the
    core process inherits. :meth:`take` runs on any thread (a recorder's).
    """

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix=f"stepview-stacks-{os.getpid()}-"))
        os.environ[files.STACKS_DIR_ENV] = str(self.folder)
        self._lock = threading.Lock()  # one ask at a time: offsets in the files

    def close(self) -> None:
        if os.environ.get(files.STACKS_DIR_ENV) == str(self.folder):
            del os.environ[files.STACKS_DIR_ENV]
        shutil.rmtree(self.folder, ignore_errors=True)

    def take(self, since: float) -> list[CoreStacks]:
        """Each core's stacks now, or why not; then what its watch wrote by itself since
        ``since`` (wall clock), a hung step's stacks. Empty before a core said it is up."""
        with self._lock:
            found: list[CoreStacks] = []
            for ready in sorted(self.folder.glob("core-*.json")):
                if ready.name.endswith(".hung.json"):
                    continue
                about = files.read_json(ready)
                if about is not None and isinstance(about.get("pid"), int):
                    found.extend(self._one(about, since))
            return found

    def _one(self, about: dict[str, Any], since: float) -> list[CoreStacks]:
        pid = int(about["pid"])
        names = {int(k): str(v) for k, v in (about.get("names") or {}).items()}
        step_thread = int(about.get("step_thread") or 0)
        core, state = _process(pid)
        if state is None:
            why: str | None = f"the engine core process {core} has exited"
            now = CoreStacks(core, time.time(), NONE, why_none=why)
        elif state == _FOREIGN:
            why = f"process {core} is no process of this stepview's: not signalled"
            now = CoreStacks(core, time.time(), NONE, why_none=why)
        elif state in ("stopped", "tracing-stop"):
            why = (
                f"the engine core process {core} is stopped (psutil: {state!r}; kill -STOP, or "
                f"a debugger holds it): a stopped process runs no signal handler, so it cannot "
                f"write its stacks until it is continued (kill -CONT {pid})"
            )
            now = CoreStacks(core, time.time(), NONE, why_none=why)
        elif about.get("signal") is None:
            why = f"the engine core process {core} does not answer {files.STACKS_SIGNAL.name}"
            now = CoreStacks(core, time.time(), NONE, why_none=why)
        else:
            now = self._ask(pid, core, state, names, step_thread)
        automatic = self._automatic(pid, core, since, names, step_thread)
        return [now, *automatic]

    def _ask(
        self, pid: int, core: str, state: str, names: dict[int, str], step_thread: int
    ) -> CoreStacks:
        """Signal the core and read what its handler writes (from where the last ask ended)."""
        path = files.asked_file(self.folder, pid)
        before = _size(path)
        asked_at = time.time()
        try:
            os.kill(pid, files.STACKS_SIGNAL)
        except OSError as exc:
            why = f"cannot signal the engine core process {core}: {exc.strerror or exc}"
            return CoreStacks(core, asked_at, NONE, why_none=why)
        text = _grown(path, before, ANSWER_WAIT_S)
        if not text:
            why = (
                f"no answer from the engine core process {core} within {ANSWER_WAIT_S:.0f} s "
                f"of {files.STACKS_SIGNAL.name} (psutil: {state!r}; a process in "
                f"uninterruptible sleep, in a driver, runs no handler until it leaves it)"
            )
            return CoreStacks(core, asked_at, NONE, why_none=why)
        return CoreStacks(
            core,
            asked_at,
            ASKED,
            text,
            note=f"written by the core's {files.STACKS_SIGNAL.name} handler (faulthandler)",
            names=names,
            step_thread=step_thread,
        )

    def _automatic(
        self, pid: int, core: str, since: float, names: dict[int, str], step_thread: int
    ) -> list[CoreStacks]:
        """What the plug-in's watch and faulthandler's watchdog wrote since ``since``."""
        found: list[CoreStacks] = []
        hung = files.read_json(files.hung_file(self.folder, pid))
        if hung is not None and float(hung.get("taken") or 0.0) >= since:
            found.append(
                CoreStacks(
                    core,
                    float(hung["taken"]),
                    HUNG_STEP,
                    str(hung.get("text") or ""),
                    note=str(hung.get("note") or ""),
                    names=names,
                    step_thread=step_thread,
                )
            )
        watchdog = files.watchdog_file(self.folder, pid)
        with contextlib.suppress(OSError):
            written = watchdog.stat().st_mtime
            if written >= since and watchdog.stat().st_size:
                note = "written by faulthandler's watchdog: the core held the GIL meanwhile"
                text = watchdog.read_text(encoding="utf-8", errors="replace")
                found.append(
                    CoreStacks(
                        core,
                        written,
                        WATCHDOG,
                        text,
                        note=note,
                        names=names,
                        step_thread=step_thread,
                    )
                )
        return found


class InProcessStacks:
    """The engine core runs in this process: its stacks are this process's."""

    def take(self, since: float) -> list[CoreStacks]:
        names = thread_names()
        driver = next((i for i, n in names.items() if n == "stepview-driver"), 0)
        note = "the engine core runs in stepview's own process: every thread of stepview's"
        core = f"{os.getpid()} (stepview, the engine core in process)"
        text = dump_all_threads()
        return [
            CoreStacks(
                core, time.time(), IN_PROCESS, text, note=note, names=names, step_thread=driver
            )
        ]

    def close(self) -> None:
        pass


def open_stacks(multiprocess: bool) -> OwnCoreStacks | InProcessStacks:
    """The stacks of the engine about to start, its core in its own process or in this one."""
    return OwnCoreStacks() if multiprocess else InProcessStacks()


def _process(pid: int) -> tuple[str, str | None]:
    """``"1234 (VLLM::EngineCore)"`` and psutil's status of it; ``None`` once it has exited
    (a zombie included); :data:`_FOREIGN` for a process that is not this stepview's."""
    import psutil

    try:
        process = psutil.Process(pid)
        core = f"{pid} ({process.name()})"
        mine = any(p.pid == pid for p in psutil.Process().children(recursive=True))
        status = str(process.status())
    except psutil.Error:
        return f"{pid}", None
    if status == psutil.STATUS_ZOMBIE:
        return core, None
    return core, status if mine else _FOREIGN


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _grown(path: Path, before: int, wait: float) -> str:
    """What was appended to ``path`` past ``before`` once it stopped growing (``""`` if
    nothing was within ``wait`` seconds)."""
    deadline = time.monotonic() + wait
    seen = before
    while time.monotonic() < deadline:
        time.sleep(_POLL_S)
        size = _size(path)
        if size > before and size == seen:
            break
        seen = size
    if seen <= before:
        return ""
    with open(path, "rb") as written:
        written.seek(before)
        return written.read().decode("utf-8", "replace")
