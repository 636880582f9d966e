"""How a benchmark starts a fresh Python of its own: by module name, finding the package anywhere.

Several benchmarks run each measurement in a child process (one vLLM engine per process; the
app alone on a terminal). A child started by file path (``python benchmarks/x.py``) imports
the package's other modules only if its own folder is on ``sys.path``, which is why the
scripts once edited ``sys.path``; a child started as ``python -m benchmarks.x`` imports them
the one way the package does. ``python -m`` finds ``benchmarks`` only on the path, so every
child gets the repository root on ``PYTHONPATH``: it works whatever directory the parent was
started from and whatever directory the child runs in.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The repository root: the folder holding the ``benchmarks`` (and ``stepview``) packages."""


def module_command(module: str, *args: str) -> list[str]:
    """``python -m module args...`` with this interpreter (the venv's, not the first on PATH)."""
    return [sys.executable, "-m", module, *args]


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with :data:`ROOT` first on ``PYTHONPATH``.

    What was on ``PYTHONPATH`` stays behind it: the quick test loop puts a folder there that
    hides vLLM from every process, children included.
    """
    env = dict(os.environ if base is None else base)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *rest])
    return env


def sigint_as_a_user_has_it() -> None:
    """``preexec_fn`` for a child that the benchmark stops with SIGINT, as a user's Ctrl+C:
    SIGINT back at its default. A benchmark started from a background job (a CI script, a
    test run under nohup) inherits SIGINT ignored, and stepview keeps a stop signal it was
    started ignoring (nohup's promise): the SIGINT would be lost and the child killed."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
