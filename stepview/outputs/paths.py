"""The check of every file the command line names, before anything starts.

One rule for every output flag (and ``--log-file``), the shell's rule for ``>``
(:func:`output_path_problem`), and one check of them all together (:func:`check_output_paths`):
two flags naming one file would write over each other. The files come from the output
registry's entries (:func:`stepview.outputs.registry.output_paths`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def output_path_problem(path: Path) -> str | None:
    """Why ``path`` cannot be written as an output file (``--results``, ``--record``,
    ``--log-file``), or None when it can.

    One rule for every output flag, the shell's rule for ``>``: the directory must exist;
    stepview creates only its own default directories, so a mistyped directory is refused
    instead of silently created. Checked before the engine starts (nothing to wait for when
    the path is wrong), by a real open: it sees permissions, read-only file systems and
    directories in the way, as root too. A file that did not exist is removed again, so a
    start that fails later leaves nothing behind; an existing one is opened without being
    truncated.
    """
    parent = path.parent
    if path.is_dir():
        return f"{path} is a directory"
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        return f"directory {parent} {what}"
    existed = path.exists()
    flags = os.O_WRONLY | os.O_APPEND if existed else os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        os.close(os.open(path, flags, 0o666))
        if not existed:
            path.unlink()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def check_output_paths(named: Mapping[str, Path | None]) -> str | None:
    """The first problem with the output files ``{flag: path}`` that are given, as a line to
    show; None when all can be written. Two flags naming one file is a problem too: the
    results and the trace would be written over each other (a device is no file to mix)."""
    seen: dict[Path, str] = {}
    for flag, path in named.items():
        if path is None:
            continue
        problem = output_path_problem(path)
        if problem is not None:
            return f"cannot write {flag} {path}: {problem}"
        key = path.resolve()
        # A device (/dev/null, /dev/full) takes any number of writers without mixing files.
        if key in seen and not key.is_char_device():
            return f"{seen[key]} and {flag} name the same file, {path}"
        seen[key] = flag
    return None
