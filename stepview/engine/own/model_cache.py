"""Built-in models kept in the user cache: built once, atomically, rebuilt when broken.

Both built-in models (:mod:`~stepview.engine.own.tiny_model`, made from nothing, and
:mod:`~stepview.engine.own.smollm2`, converted from a GGUF file) are folders under
``platformdirs.user_cache_dir("stepview")`` named after a hash of their recipe, so a changed
recipe gets a fresh folder instead of a stale one. A build happens in a temporary sibling
folder that is renamed into place only when complete; the builder writes a marker last, and
the model's own check reads it, so a crashed build is told from a finished one.

A build killed outright (SIGKILL, a power cut) cannot remove its temporary folder, which for
SmolLM2 holds hundreds of MB: every temporary and discarded folder is named after the process
that made it, and each call clears those whose process is gone, or that are older than any
build could be (:data:`STALE_AFTER_S`, for a process id used again).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

STALE_AFTER_S = 3600.0
"""A temporary folder untouched this long is left from a dead build whatever its process id
says (a SmolLM2 conversion takes ~20 s here; a slow disk, minutes)."""


def default_cache_dir() -> Path:
    """``platformdirs.user_cache_dir("stepview")``."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("stepview"))


def ensure_built(
    parent: Path | None,
    folder: str,
    is_complete: Callable[[Path], bool],
    build: Callable[[Path], None],
) -> Path:
    """Return ``parent / folder``, calling ``build(tmp)`` first unless it ``is_complete``.

    ``parent`` defaults to the user cache dir. Safe against crashes (the folder appears
    complete or not at all) and against two processes building at once (the first rename
    wins, and the other uses its result if that is sound).
    """
    parent = parent if parent is not None else default_cache_dir()
    target = parent / folder
    clear_stale(parent)
    if is_complete(target):
        return target
    parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        discard(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder}.{os.getpid()}.", suffix=".tmp", dir=parent))
    try:
        build(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            if not is_complete(target):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def discard(path: Path) -> None:
    """Move a broken build aside, then delete it (a rename is atomic; rmtree is not)."""
    trash = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.broken")
    try:
        os.rename(path, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def clear_stale(parent: Path, now: float | None = None) -> list[Path]:
    """Delete the temporary and discarded folders in ``parent`` that no build will finish: their
    process is gone, or they are older than :data:`STALE_AFTER_S` (or named as an earlier
    stepview named them, without a process id, and that old). The folders deleted."""
    now = time.time() if now is None else now
    cleared = []
    with contextlib.suppress(OSError):
        for path in parent.iterdir():
            ours = path.name.startswith(".") and path.suffix in (".tmp", ".broken")
            if ours and path.is_dir() and _stale(path, now):
                shutil.rmtree(path, ignore_errors=True)
                cleared.append(path)
    return cleared


def _stale(path: Path, now: float) -> bool:
    try:
        if now - path.stat().st_mtime > STALE_AFTER_S:
            return True
    except OSError:
        return False
    parts = path.name.split(".")  # "", folder, pid, random, "tmp"
    if len(parts) < 5 or not parts[-3].isdigit():
        return False  # an earlier stepview's name: only its age tells
    return not _alive(int(parts[-3]))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True
