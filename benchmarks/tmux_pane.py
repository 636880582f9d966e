"""stepview in a private tmux server, as a user runs it: for the benchmarks that drive the TUI.

Each :class:`Tmux` has its own socket (``tmux -L NAME``), so a benchmark never touches the
user's sessions, and one detached session of :data:`TUI_SIZE`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

TUI_SIZE = (120, 40)


def stepview_command() -> list[str]:
    """The installed ``stepview`` script next to this Python, else ``python -m stepview``."""
    script = Path(sys.executable).parent / "stepview"
    return [str(script)] if script.exists() else [sys.executable, "-m", "stepview"]


class Tmux:
    """A private tmux server (its own socket) holding one detached session."""

    def __init__(self, name: str, env: dict[str, str]) -> None:
        self._base = ["tmux", "-L", name]
        self._env = env
        folder = Path(env.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        self._socket = folder / name  # where tmux -L puts it: left behind by kill-server

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._base, *args], env=self._env, capture_output=True, text=True, check=False
        )

    def start(self, command: str) -> None:
        width, height = TUI_SIZE
        done = self._run(
            "new-session", "-d", "-x", str(width), "-y", str(height), "-s", "b", command
        )
        if done.returncode != 0:
            raise RuntimeError(f"tmux new-session failed: {done.stderr.strip()}")

    def screen(self) -> str:
        return self._run("capture-pane", "-p", "-t", "b").stdout

    def press(self, key: str) -> None:
        self._run("send-keys", "-t", "b", key)

    def alive(self) -> bool:
        return self._run("has-session", "-t", "b").returncode == 0

    def cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by the pane's processes: the program it runs."""
        import psutil  # a vLLM dependency

        pid = int(self._run("list-panes", "-t", "b", "-F", "#{pane_pid}").stdout.split()[0])
        pane = psutil.Process(pid)
        total = 0.0
        for process in (pane, *pane.children(recursive=True)):
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                total += times.user + times.system
        return total

    def kill(self) -> None:
        self._run("kill-server")
        self._socket.unlink(missing_ok=True)


def wait_for(condition: Callable[[], bool], timeout: float, what: str, interval: float) -> float:
    """Poll ``condition`` until true; returns when it became true (perf_counter)."""
    deadline = time.perf_counter() + timeout
    while True:
        if condition():
            return time.perf_counter()
        if time.perf_counter() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def count_lines(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(1 for line in handle if line.endswith(b"\n"))
    except FileNotFoundError:
        return 0
