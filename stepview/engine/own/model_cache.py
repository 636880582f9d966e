"""Built-in models kept in the user cache: built once, atomically, rebuilt when broken.

Both built-in models (:mod:`~stepview.engine.own.tiny_model`, made from nothing, and
:mod:`~stepview.engine.own.smollm2`, converted from a GGUF file) are folders under
``platformdirs.user_cache_dir("stepview")`` named after a hash of their recipe, so a changed
recipe gets a fresh folder instead of a stale one. A build happens in a temporary sibling
folder that is renamed into place only when complete; the builder writes a marker last, and
the model's own check reads it, so a crashed build is told from a finished one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


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
    if is_complete(target):
        return target
    parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        discard(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder}.", suffix=".tmp", dir=parent))
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
    trash = path.with_name(f".{path.name}.broken-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.rename(path, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)
