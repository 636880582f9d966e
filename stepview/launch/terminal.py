"""The terminal the TUI needs: keys in on stdin, drawing out on stderr, nothing on stdout.

Textual (8.2.8) reads keys from file descriptor 0 and draws on ``sys.__stderr__``, and has no
option to use the controlling terminal instead. Started with stdin from a pipe or /dev/null
(``echo | stepview``), it drew but read no keys, and two threads spun at full CPU on a
descriptor at end of file. So before the TUI starts, :func:`claim_terminal` puts the
controlling terminal (``/dev/tty``) on descriptor 0 when stdin is not a terminal, as
``less`` and ``fzf`` do; without one it refuses in one line. Output redirected away from the
terminal is refused too: the user meant to keep it, and the TUI writes nothing there.
"""

from __future__ import annotations

import contextlib
import os
import sys


def claim_terminal(hint: str) -> str | None:
    """Make stdin the controlling terminal if it is not one; why the TUI cannot run, if so.

    ``hint`` ends the refusal (what to do instead: ``--headless`` for a live run).
    """
    if not os.isatty(0):
        try:
            tty = os.open("/dev/tty", os.O_RDWR)
        except OSError:
            return f"stdin is not a terminal and there is no terminal to read keys from{hint}"
        if tty != 0:  # 0 when stdin was closed: the terminal took its place already
            os.dup2(tty, 0)
            os.close(tty)
        if sys.__stdin__ is None:  # Python found no stdin at start; Textual reads this one
            with contextlib.suppress(OSError):
                stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - lives as long as the process
                sys.stdin = stdin
                setattr(sys, "__stdin__", stdin)  # noqa: B010 - typeshed marks it Final
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if not os.isatty(fd):
            redirected = f"{name} is not a terminal (redirected to a file or a pipe)"
            return f"{redirected}: the TUI draws on the terminal{hint}"
    return None
