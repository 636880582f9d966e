"""The terminal driver stepview's apps run on: Textual's own, made safe for a hang-up.

When a terminal goes away (an ssh connection drops, a tmux session is killed) the kernel sends
the foreground process group SIGHUP *and* SIGCONT. Textual's driver takes any SIGCONT as the end
of a Ctrl+Z suspend and restarts application mode: a second writer thread on a terminal that is
gone. Its first write fails (EIO) and the thread dies; the app's next writes fill its queue and
the quit that SIGHUP asked for blocks on it until the exit watchdog ends the process. Seen in
``tests/e2e/test_signals.py`` about one run in five on a busy machine (7 s instead of 1.5 s).

:class:`HangUpSafeDriver` resumes only after a suspend of its own.
"""

from __future__ import annotations

import sys
from typing import Any

from textual.driver import Driver


def driver_class() -> type[Driver] | None:
    """The driver for a real terminal here, or ``None`` for Textual's choice (Windows)."""
    if sys.platform == "win32":
        return None
    return HangUpSafeDriver


if sys.platform != "win32":
    from textual.drivers.linux_driver import LinuxDriver

    class HangUpSafeDriver(LinuxDriver):
        """Textual's POSIX driver, resuming on SIGCONT only after its own SIGTSTP."""

        _suspended = False

        def _sigtstp_application(self, *args: Any) -> None:
            self._suspended = True
            super()._sigtstp_application(*args)

        def _sigcont_application(self, *args: Any) -> None:
            if self._suspended:  # not the SIGCONT that comes with a hang-up
                self._suspended = False
                super()._sigcont_application(*args)
