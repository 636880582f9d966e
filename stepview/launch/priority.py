"""A guest's CPU priority: stepview's own nice value, and its session's scheduler autogroup.

Attached, stepview runs below the server it watches (``--nice``, 10 by default). On Linux
with scheduler autogroups (``/proc/sys/kernel/sched_autogroup_enabled``, on in most
distributions' kernels), a process's nice value counts only against the processes of its
own session (sched(7), "The autogroup feature"): the kernel first shares the CPU between
sessions, each an autogroup of equal weight, then within each by nice. stepview in a tmux
pane or an ssh login of its own is such a session, so lowering its nice alone changed
nothing against a server started from another one: measured here, a busy loop at nice 10
in a session of its own took 1.36 s of CPU in 2 s beside two at nice 0 in another session.

So stepview also lowers its session's autogroup, by as much, when nothing else runs in that
session but the processes that wait for it (the shell that started it, a tmux pane's), and
puts it back as it exits. A session that holds other work (a script starting several
watches, a test run) is left as it is: lowering it would lower that work too, and its
restoring would race theirs.
"""

from __future__ import annotations

import atexit
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

AUTOGROUP = Path("/proc/self/autogroup")
AUTOGROUP_ENABLED = Path("/proc/sys/kernel/sched_autogroup_enabled")
PROC = Path("/proc")
LOWEST = 19  # the lowest priority a nice value (a process's or an autogroup's) can say


def lower_priority(nice: int) -> None:
    """Run stepview ``nice`` steps below its CPU priority, before it starts any thread.

    Attached, stepview is a guest: on a machine whose cores the server needs (a small box,
    or a GPU box whose front-end process is busy), the scheduler gives the CPU to the server
    first and the view falls behind (it drops records it cannot keep up with), instead of
    the server slowing down. On Linux a thread's priority is inherited by the threads it
    starts, so this comes before the app and the receiver start theirs.
    """
    if nice <= 0:
        return
    try:
        now = os.nice(nice)
    except OSError as exc:  # not allowed here (a sandbox): watch at normal priority
        log.info("stepview: could not lower the CPU priority: %s", exc)
        return
    log.info("stepview: attached at CPU priority nice %d (--nice)", now)
    lower_autogroup(nice)


def lower_autogroup(nice: int) -> None:
    """Lower this session's scheduler autogroup by ``nice`` until stepview exits, where the
    session is stepview's alone (see the module's docstring); say in the log what was done."""
    if not _autogroups_on():
        return
    before = read_autogroup_nice()
    if before is None:
        return
    others = session_others()
    if others:
        log.info(
            "stepview: %d other process(es) in this session (pid %s): its scheduler "
            "autogroup is left at nice %d, so --nice counts only against them",
            len(others),
            ", ".join(map(str, others[:5])),
            before,
        )
        return
    lowered = min(LOWEST, before + nice)
    if lowered == before or not _write_autogroup(lowered):
        return
    atexit.register(_restore_autogroup, lowered, before)
    log.info("stepview: its session's scheduler autogroup at nice %d until it exits", lowered)


def _autogroups_on() -> bool:
    try:
        return AUTOGROUP_ENABLED.read_text().strip() == "1"
    except OSError:  # not Linux, or a kernel without autogroups
        return False


def read_autogroup_nice() -> int | None:
    """This process's autogroup's nice value (``/autogroup-17 nice 0``), or ``None``."""
    try:
        fields = AUTOGROUP.read_text().split()
    except OSError:
        return None
    if len(fields) != 3 or fields[1] != "nice":
        return None
    try:
        return int(fields[2])
    except ValueError:
        return None


def _write_autogroup(nice: int) -> bool:
    try:
        AUTOGROUP.write_text(f"{nice}\n")
    except OSError as exc:
        log.info("stepview: could not lower its session's scheduler autogroup: %s", exc)
        return False
    return True


def _restore_autogroup(lowered: int, before: int) -> None:
    """Put the session's autogroup back, unless someone changed it since (theirs to keep)."""
    if read_autogroup_nice() == lowered:
        _write_autogroup(before)


def session_others() -> list[int]:
    """The processes of stepview's session other than stepview and its ancestors."""
    me = os.getpid()
    session = os.getsid(0)
    ancestors = set()
    pid = me
    while pid > 1:
        stat = _stat(pid)
        if stat is None:
            break
        ancestors.add(pid)
        pid = stat[0]
    others = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        stat = _stat(pid)
        if stat is not None and stat[1] == session and pid not in ancestors:
            others.append(pid)
    return sorted(others)


def _stat(pid: int) -> tuple[int, int] | None:
    """A process's parent and session, from ``/proc/PID/stat`` (``None``: it is gone)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[3])
