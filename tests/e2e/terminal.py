"""A real terminal for the real ``stepview`` command: tmux, driven and read like a person would.

Each :class:`Terminal` is its own tmux server (``tmux -L stepview-test-<pid>-<n>``), so tests
never see each other's sessions and a finalizer can kill exactly what the test started.
Commands run in an interactive ``bash`` with a fixed prompt, typed in as text followed by
``; echo EXIT=$?``: after the app leaves, the pane shows what the user would see, the shell
prompt and the exit code included.

Nothing here imports vLLM: the command under test does, in its own process.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import psutil

from stepview.launch.runner import EXIT_WATCHDOG_S

PROMPT = "stepview-test$ "
STEPVIEW = str(Path(sys.executable).with_name("stepview"))  # the installed console script
STARTUP_S = 600.0
"""How long a wait that includes an engine's start-up (vLLM's import, the model's load) may
take. ~15 s on a quiet machine; beside two busy loops and another worker's engine, an engine
core's import of vLLM alone took over 2.5 min, and a 180 s wait failed a run. A wait this
long fails only when the start is stuck, never because the machine is slow."""
_EXIT = re.compile(r"^EXIT=(\d+)\s*$", re.MULTILINE)
_servers = itertools.count()


def command_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a user's shell would give stepview here: offline, no usage stats."""
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        PYTHONUNBUFFERED="1",
        TERM="xterm-256color",
    )
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    env.pop("TMUX", None)
    env.update(extra or {})
    return env


def gone(process: psutil.Process) -> bool:
    """True once ``process`` has exited (a zombie waiting for its parent counts as exited)."""
    try:
        return bool(process.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


class Terminal:
    """One tmux session of ``width`` x ``height`` running an interactive shell."""

    def __init__(
        self,
        width: int = 80,
        height: int = 24,
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.socket = f"stepview-test-{os.getpid()}-{next(_servers)}"
        self.width = width
        self.height = height
        self.met_at = 0.0  # see wait_for
        # The first tmux command starts the server, which passes this environment on.
        self.tmux(
            "new-session",
            "-d",
            "-x",
            str(width),
            "-y",
            str(height),
            "-s",
            "main",
            "-c",
            str(cwd),
            # tmux does not hand PS1 on from its environment; set it on the shell itself.
            f"env PS1={shlex.quote(PROMPT)} bash --norc --noprofile",
            env=command_env(env),
        )
        self._socket_path = Path(self.tmux("display-message", "-p", "#{socket_path}").strip())
        self.wait_for(lambda screen: screen.rstrip().endswith(PROMPT.rstrip()), timeout=10)

    # -- tmux ------------------------------------------------------------------------------

    def tmux(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            env=dict(env) if env is not None else None,
            timeout=30,
        )
        if done.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    def close(self) -> None:
        """Kill the tmux server and everything in it (idempotent; for finalizers)."""
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)
        self._socket_path.unlink(missing_ok=True)  # tmux leaves it behind

    # -- input -----------------------------------------------------------------------------

    def run(self, argv: Sequence[str]) -> None:
        """Type ``argv`` as a shell command followed by ``; echo EXIT=$?``, and press enter."""
        self.type(" ".join(shlex.quote(a) for a in argv) + "; echo EXIT=$?")
        self.keys("Enter")

    def type(self, text: str) -> None:
        """Type ``text`` literally (no key names)."""
        self.tmux("send-keys", "-t", "main", "-l", text)

    def keys(self, *keys: str) -> None:
        """Press tmux key names (``Enter``, ``C-c``, ``Escape``, ``q``, ...) in one burst."""
        self.tmux("send-keys", "-t", "main", *keys)

    def press(self, *keys: str, gap: float = 0.15) -> None:
        """Press keys one at a time, ``gap`` seconds apart, as a person does.

        A burst of keys that move the focus would be delivered before the focus has moved
        (Textual moves it on a later message): a person never types that fast.
        """
        for key in keys:
            self.keys(key)
            time.sleep(gap)

    def resize(self, width: int, height: int) -> None:
        self.tmux("resize-window", "-t", "main", "-x", str(width), "-y", str(height))
        self.width, self.height = width, height

    def hang_up(self) -> None:
        """What a dropped ssh connection does: the session goes, the app gets SIGHUP."""
        self.tmux("kill-session", "-t", "main")

    # -- output ----------------------------------------------------------------------------

    def screen(self) -> str:
        """What the pane shows now, one line per row."""
        return self.tmux("capture-pane", "-p", "-t", "main")

    def text(self) -> str:
        """What the pane shows now, each line the shell wrapped at the pane's edge joined back
        whole (``capture-pane -J``): a message is matched whatever the width and the length
        of the temporary path in it (xdist's are longer); not for a full-screen app's rows."""
        return self.tmux("capture-pane", "-p", "-J", "-t", "main")

    def cursor_row(self) -> int:
        """The row of the terminal's cursor (Textual keeps it in the focused text field)."""
        return int(self.flag("cursor_y"))

    def flag(self, name: str) -> str:
        """A pane format variable (``alternate_on``, ``cursor_flag``, ``mouse_any_flag``...)."""
        return self.tmux("display-message", "-p", "-t", "main", f"#{{{name}}}").strip()

    def wait_for(self, condition: Callable[[str], bool], timeout: float = 60.0) -> str:
        """Poll the screen until ``condition(screen)``; fail showing the last screen.

        :attr:`met_at` is then when the capture that met it was asked for: tmux, starved of
        CPU beside an engine, can take seconds to answer, and that is tmux's time, not the
        app's."""
        deadline = time.monotonic() + timeout
        asked = time.monotonic()
        screen = self.screen()
        while not condition(screen):
            if time.monotonic() > deadline:
                raise AssertionError(f"screen condition not met in {timeout}s:\n{screen}")
            time.sleep(0.05)
            asked = time.monotonic()
            screen = self.screen()
        self.met_at = asked
        return screen

    def wait_for_text(self, text: str, timeout: float = 60.0) -> str:
        return self.wait_for(lambda screen: text in screen, timeout)

    def wait_for_exit(self, timeout: float = 30.0) -> int:
        """Wait for the ``EXIT=N`` line the shell prints after the command, and for the prompt
        it prints after that in a write of its own (a capture can fall between the two);
        return N."""

        def back_at_the_prompt(screen: str) -> bool:
            return _EXIT.search(screen) is not None and screen.rstrip().endswith(PROMPT.rstrip())

        screen = self.wait_for(back_at_the_prompt, timeout)
        *_, match = _EXIT.finditer(screen)
        return int(match.group(1))

    # -- processes -------------------------------------------------------------------------

    def shell(self) -> psutil.Process:
        return psutil.Process(int(self.flag("pane_pid")))

    def command_process(self, timeout: float = 30.0) -> psutil.Process:
        """The process the shell started for the typed command (stepview itself)."""
        deadline = time.monotonic() + timeout
        shell = self.shell()
        while time.monotonic() < deadline:
            children = shell.children()
            if children:
                return children[0]
            time.sleep(0.02)
        raise AssertionError("the command did not start")


QUIT_WITHIN_S = EXIT_WATCHDOG_S + 13.0
"""How long a quit may take before a test calls it hung: stepview's exit watchdog ends it
:data:`~stepview.launch.runner.EXIT_WATCHDOG_S` after a stop at the latest; the rest is room
for a loaded machine to run that (5 s, below the watchdog, failed beside other engines). A
quit that hangs never ends, so the bound tells the two apart on any machine."""


def wait_gone(process: psutil.Process, timeout: float) -> float:
    """Seconds until ``process`` exits; fails if it is still running after ``timeout``."""
    start = time.monotonic()
    while not gone(process):
        if time.monotonic() - start > timeout:
            raise AssertionError(f"process {process.pid} still running after {timeout}s")
        time.sleep(0.02)
    return time.monotonic() - start


def process_tree(process: psutil.Process) -> list[psutil.Process]:
    """``process`` and every process it started (vLLM may start helpers), for a leftover check."""
    return [process, *process.children(recursive=True)]


def alive(processes: Sequence[psutil.Process]) -> list[psutil.Process]:
    """The ones of ``processes`` that have not exited."""
    return [p for p in processes if not gone(p)]
