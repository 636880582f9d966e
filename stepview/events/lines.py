"""``--events -`` and ``--events FILE``: one JSON object per line, as the events come.

Written on the driver thread and flushed per snapshot, as the results file is
(:class:`~stepview.trace.linefile.LineFile`): a killed stepview loses at most the step in
flight, and a failed write stops this file only, never the engine. A file goes on in a new
part past :data:`~stepview.events.spec.FILE_ROTATE` and keeps the newest
:data:`~stepview.events.spec.FILE_KEEP` (the trace's rotation,
:class:`~stepview.trace.linefile.PartedFile`), so a watch left running for weeks never fills
the disk. A fleet's drivers share one file: each batch is written under a lock.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from typing import IO, Any

from stepview.events.spec import FILE_KEEP, FILE_ROTATE
from stepview.trace.linefile import PartedFile

log = logging.getLogger(__name__)

Event = dict[str, Any]


def _text(events: Sequence[Event]) -> str:
    return "".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) + "\n" for e in events)


class EventFile(PartedFile):
    """The events as JSON Lines in a file, rotated (see the module docstring)."""

    def __init__(self, path: str, *, rotate: int = FILE_ROTATE, keep: int = FILE_KEEP) -> None:
        super().__init__(path, "w", rotate=rotate, keep=keep)
        self._lock = threading.Lock()

    def put(self, events: Sequence[Event]) -> None:
        if not events:
            return
        with self._lock:
            if self.full and not self.next_part():
                return
            self.write_text(_text(events))

    def close(self) -> None:
        with self._lock:
            self.close_file()


class EventPrinter:
    """The events as JSON Lines on standard output (``--events -``). A reader that goes
    away (a closed pipe) stops the printing, not the run."""

    def __init__(self, out: IO[str]) -> None:
        self._out: IO[str] | None = out
        self._lock = threading.Lock()
        self.error: str | None = None

    def put(self, events: Sequence[Event]) -> None:
        if not events:
            return
        with self._lock:
            out = self._out
            if out is None:
                return
            try:
                out.write(_text(events))
                out.flush()
            except (OSError, ValueError) as exc:
                self._out = None
                log.warning("events to standard output stopped: %s", exc)

    def close(self) -> None:
        pass
