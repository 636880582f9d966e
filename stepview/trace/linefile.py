"""A JSON Lines file written while the engine runs: the trace, and the results file.

Both are driver sinks (:class:`~stepview.model.sink.SnapshotSink`), written on the driver
thread between two engine steps, so they do only what must happen now: write the lines, flush.
They flush after every call, not ``fsync``: a crashed or killed stepview then loses at most
the step in flight (the data is in the kernel's page cache), and a step is not slowed by a
disk round trip. A machine crash can lose more; that is the trade.

A sink must never take the engine down: a failed write (disk full, file removed) is logged,
kept in :attr:`LineFile.error`, and stops that file only.

A file of a long run goes on in a new one (its *part*) once it holds a size
(:class:`PartedFile`): ``run.jsonl``, ``run.2.jsonl``, ``run.3.jsonl``..., the oldest removed
past a count. The trace rotates so (``--record-rotate``), and so does the event stream's file
(``--events FILE``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from stepview.trace.format import dump_line

log = logging.getLogger(__name__)


class LineFile:
    """A text file written a line at a time and flushed; the first write error disables it."""

    def __init__(self, path: str | os.PathLike[str], mode: str) -> None:
        self.path = os.fspath(path)
        self._file: IO[str] | None = open(self.path, mode, encoding="utf-8", newline="\n")  # noqa: SIM115 - closed by close_file()
        self.error: str | None = None
        """Why writing stopped mid-run, to tell the user; None while all is well."""
        self.written = 0
        """Characters written to this file so far (its size, for ASCII text)."""

    def reopen(self, path: str | os.PathLike[str]) -> bool:
        """Close this file and go on in a new one at ``path`` (a trace's next part); False,
        with the reason in :attr:`error`, if it cannot be made."""
        self.close_file()
        if self.error is not None:
            return False
        self.path = os.fspath(path)
        try:
            self._file = open(self.path, "w", encoding="utf-8", newline="\n")  # noqa: SIM115 - closed by close_file()
        except OSError as exc:
            self.fail(f"cannot open {self.path}: {exc.strerror or exc}")
            return False
        self.written = 0
        return True

    @property
    def writable(self) -> bool:
        """False once writing failed (see :attr:`error`) or the file was closed."""
        return self._file is not None

    def write_lines(self, lines: Sequence[Mapping[str, Any]]) -> bool:
        """Write and flush ``lines``; False if the file is (or just became) unusable."""
        try:
            text = "".join(dump_line(line) for line in lines)
        except (ValueError, TypeError) as exc:
            self.fail(f"writing {self.path} failed: {exc}")
            return False
        return self.write_text(text)

    def write_text(self, text: str) -> bool:
        """Write and flush lines already made (:func:`~stepview.trace.format.dump_line`)."""
        file = self._file
        if file is None:
            return False
        try:
            file.write(text)
            file.flush()
            self.written += len(text)
        except (OSError, ValueError) as exc:
            self.fail(f"writing {self.path} failed: {exc}")
            return False
        return True

    def fail(self, message: str) -> None:
        """Stop writing for good: keep the reason, log it, let the engine run on."""
        self.error = message
        log.error("%s; no more is written to it", message)
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()

    def close_file(self) -> None:
        """Close the file (once); a failed close is kept in :attr:`error`."""
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError as exc:
                self.error = f"closing {self.path} failed: {exc}"
                log.error("%s", self.error)


def part_path(first: str | os.PathLike[str], part: int) -> Path:
    """The file of a rotated file's ``part`` (1 is ``first`` itself): ``run.3.jsonl``."""
    path = Path(first)
    return path if part == 1 else path.with_name(f"{path.stem}.{part}{path.suffix}")


class PartedFile(LineFile):
    """A :class:`LineFile` that goes on in a new part once it holds ``rotate`` characters
    (``None``: never), keeping the newest ``keep`` parts (``None``: all)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: str,
        *,
        rotate: int | None = None,
        keep: int | None = None,
    ) -> None:
        super().__init__(path, mode)
        self._rotate = rotate
        self._keep = keep
        self._parts = [self.path]  # every part written, oldest first (removed ones too)

    @property
    def full(self) -> bool:
        """The current part holds its size: the next write belongs in a new one."""
        return self._rotate is not None and self.written >= self._rotate

    def next_part(self) -> bool:
        """Close this part and go on in the next (older ones past ``keep`` removed); False,
        with the reason in :attr:`error`, if it cannot be made."""
        part = len(self._parts) + 1
        if not self.reopen(part_path(self._parts[0], part)):
            return False
        self._parts.append(self.path)
        if self._keep is not None:
            for old in self._parts[: -self._keep]:
                with contextlib.suppress(OSError):  # gone already, or not ours to remove
                    os.remove(old)
                    log.info("removed %s (keeping the newest %d)", old, self._keep)
        return True

    def kept_before(self) -> list[str]:
        """The names of the parts before the current one that still exist."""
        return [Path(p).name for p in self._parts[:-1] if os.path.exists(p)]

    @property
    def parts(self) -> list[str]:
        """The files this went into, oldest first (those removed since too)."""
        return list(self._parts)
