"""``--flight-recorder DURATION``: the last minutes of a watch, kept to be written when it matters.

A watch left running for weeks cannot record everything, and the incident (a request stuck
while ``/health`` stays green) is over before anyone looks. So every snapshot is encoded as
the trace recorder would (:class:`~stepview.trace.recorder.TraceLines`) into a ring in memory,
and the ring is written as a trace of its own when an alert is raised, on ``SIGUSR1``, or on the
TUI's key (:meth:`FlightRecorder.request`, from any thread).

The ring is a deque of *segments*, each starting with a standalone step (every active request
whole), so dropping the oldest segment leaves a ring that still replays on its own. A new
segment starts every eighth of DURATION (or of the byte bound); the oldest goes once the next
one starts before the window, or when the ring holds more than ``max_bytes``: it holds between
DURATION and 9/8 of it, or less on a server too busy for the bound (the file says how much).

The file is named after when and why (``flight-20261201T231504Z-stall-step812.jsonl``); its
header's ``flight`` says why and at which step, so a replay opens there. It goes on being
written for DURATION after the trigger, so what happened next is in it too; an alert within
that time extends the same file (a ``flight`` line says so) instead of starting a second one.

With a :attr:`FlightRecorder.stacks` probe (stepview's own engine core, a watched server's
plug-in) each recording also gets the engine cores' thread stacks at that moment, or why there
are none, as a ``stacks`` line: taken on a thread of its own, since asking a core takes up to
a second or two and an alert's recording is written on the driver's thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stepview.model.flight import FlightDump
from stepview.model.snapshot import EngineInfo, EngineState, RequestView, StepSnapshot
from stepview.model.stacks import (
    NONE,
    CoreStacks,
    StacksProbe,
    stacks_record,
    stacks_summary,
)
from stepview.trace.format import dump_line, trace_header
from stepview.trace.linefile import LineFile
from stepview.trace.recorder import HeaderFields, TraceLines, header_fields

log = logging.getLogger(__name__)

SEGMENTS = 8
"""Segments a full ring holds: it keeps between DURATION and (1 + 1/SEGMENTS) of it."""


@dataclass
class _Segment:
    """Snapshots' lines from one on, each snapshot's as one string.

    Its first snapshot is encoded twice: ``whole`` (standalone, for when this segment is the
    oldest one kept) and ``bridge`` (a delta from the snapshot before, for when the segment
    before it is written too; None for the ring's very first). ``texts`` are the rest.
    """

    clock: float  # driver clock of its first snapshot
    info: EngineInfo
    whole: str
    bridge: str | None
    texts: list[str] = field(default_factory=list)
    size: int = 0

    def lines(self, first: bool) -> Iterator[str]:
        """Its text in a recording, where it is the ``first`` segment written or not."""
        yield self.whole if first or self.bridge is None else self.bridge
        yield from self.texts


class FlightRecorder:
    """A :class:`~stepview.model.sink.SnapshotSink` and a
    :class:`~stepview.model.flight.FlightControl`: the ring, and the recordings written from it.

    ``folder`` must exist. ``on_dump`` is told of each recording written or extended (on the
    thread that asked: the driver's for an alert), e.g. to print its path; ``now`` names files.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        duration: float,
        max_bytes: int,
        header: HeaderFields | None = None,
        *,
        on_dump: Callable[[FlightDump], None] | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.folder = Path(folder)
        self.duration = duration
        self.max_bytes = max_bytes
        self._header_fields = header
        self._header: dict[str, Any] | None = None
        self._on_dump = on_dump
        self._now = now
        self._lock = threading.Lock()  # the ring and the file: the driver and askers share them
        self._ring: deque[_Segment] = deque()
        self._size = 0
        self._short = False  # the byte bound, not DURATION, let the oldest go
        self._lines: TraceLines | None = None  # the ring's
        self._latest: StepSnapshot | None = None
        self._alerts: frozenset[tuple[str, str | None]] = frozenset()
        self._file: LineFile | None = None  # a recording being written
        self._file_lines: TraceLines | None = None
        self._until = 0.0  # driver clock until which it goes on
        self._last: FlightDump | None = None
        self.written = 0  # recordings written
        self.error: str | None = None
        self.stacks: StacksProbe | None = None
        """The engine cores' stacks for each recording (set once the engine is known)."""
        self._probing = False  # stacks are being taken (one at a time: it covers the rest)

    # -- SnapshotSink ----------------------------------------------------------------------------

    def on_snapshot(self, snapshot: StepSnapshot, finished: Sequence[RequestView]) -> None:
        if snapshot.engine_state is EngineState.STARTING and self._latest is None:
            return  # nothing to record before the engine is up
        with self._lock:
            try:
                self._keep(snapshot)
                if self._file is not None:
                    self._go_on(snapshot)
                raised = [a for a in snapshot.alerts if a.key not in self._alerts]
                self._alerts = frozenset(a.key for a in snapshot.alerts)
                for alert in raised:
                    self._record(alert.kind, alert.text, alert.step)
            except Exception as exc:  # a recorder bug must not stop the engine: it stops here
                log.exception("flight recorder failed at step %d", snapshot.step)
                self.error = f"flight recorder failed at step {snapshot.step}: {exc!r}"
                self._ring.clear()

    def close(self) -> None:
        with self._lock:
            self._close_file()

    # -- FlightControl ---------------------------------------------------------------------------

    def request(self, kind: str, why: str) -> None:
        with self._lock:
            if self.error is None and self._latest is not None:
                self._record(kind, why, self._latest.step)

    @property
    def last(self) -> FlightDump | None:
        return self._last

    @property
    def has_steps(self) -> bool:
        return self._latest is not None

    @property
    def held(self) -> tuple[float, int]:
        """Seconds of steps the ring holds now, and their size in bytes."""
        with self._lock:
            return self._held()

    def _held(self) -> tuple[float, int]:
        if not self._ring or self._latest is None:
            return 0.0, 0
        return self._latest.clock - self._ring[0].clock, self._size

    # -- the ring --------------------------------------------------------------------------------

    def _keep(self, snapshot: StepSnapshot) -> None:
        """Encode ``snapshot`` into the ring: a new segment when the last one is long enough
        (by time or size), then the oldest let go while the ring holds more than it must.

        A new segment's encoder starts afresh from its standalone first snapshot; the old
        encoder writes that snapshot once more as the bridge, so the two segments also read
        on from one into the other."""
        last = self._ring[-1] if self._ring else None
        lines = self._lines
        if (
            lines is None
            or last is None
            or snapshot.clock - last.clock >= self.duration / SEGMENTS
            or last.size >= self.max_bytes / SEGMENTS
        ):
            bridge = None if lines is None else _text(lines.encode(snapshot))
            lines = self._lines = TraceLines(snapshot.info, standalone=True)
            whole = _text(lines.encode(snapshot))
            last = _Segment(snapshot.clock, snapshot.info, whole, bridge)
            size = len(whole) + len(bridge or "")
            self._ring.append(last)
        else:
            text = _text(lines.encode(snapshot))
            last.texts.append(text)
            size = len(text)
        last.size += size
        self._size += size
        self._latest = snapshot
        ring = self._ring
        while len(ring) > 1:
            if ring[1].clock <= snapshot.clock - self.duration:
                self._short = False  # the window is whole again
            elif self._size > self.max_bytes:
                self._short = True
            else:
                break
            self._size -= ring.popleft().size

    # -- recordings ------------------------------------------------------------------------------

    def _record(self, kind: str, why: str, step: int) -> None:
        """Write the ring as a new recording, or extend the one being written."""
        latest = self._latest
        assert latest is not None
        self._until = latest.clock + self.duration
        file = self._file
        if file is not None and self._last is not None:
            file.write_lines([{"k": "flight", "kind": kind, "why": why, "step": step}])
            log.warning("flight recording %s goes on: %s", file.path, why)
            self._tell(
                self._last._replace(kind=kind, why=why, open=True, extended=True, stacks=None)
            )
            self._probe_stacks(kind, step, file.path)
            return
        path = self._new_path(kind, step)
        try:
            file = LineFile(path, "w")
        except OSError as exc:
            self.error = f"cannot write a flight recording in {self.folder}: {exc.strerror or exc}"
            log.error("%s", self.error)
            return
        held, size = self._held()
        flight = {"kind": kind, "why": why, "step": step, "clock": latest.clock}
        flight.update(held=round(held, 3), duration=self.duration, bytes=size)
        if self._short and held < self.duration:
            flight["short"] = (
                f"the ring held {held:.0f} s, not {self.duration:.0f} s: its bound of "
                f"{self.max_bytes >> 20} MB was reached first (--flight-max-mb)"
            )
        if self._header is None:
            self._header = header_fields(self._header_fields)
        file.write_lines([trace_header({**self._header, "flight": flight}, self._ring[0].info)])
        file.write_text("".join(t for n, seg in enumerate(self._ring) for t in seg.lines(n == 0)))
        self._file = file
        self._file_lines = TraceLines(latest.info, after=latest)
        self.written += 1
        log.warning("flight recording written to %s: %s", path, why)
        self._tell(FlightDump(path, kind, why, step))
        self._probe_stacks(kind, step, path)

    # -- the engine cores' stacks ----------------------------------------------------------------

    def _probe_stacks(self, kind: str, step: int, path: str) -> None:
        """Have the engine cores' stacks taken off this thread (under the lock)."""
        probe = self.stacks
        if probe is None or self._probing:
            return
        self._probing = True
        since = self._now() - self._held()[0] - 1.0  # what the recording holds, on the wall
        threading.Thread(
            target=self._take_stacks,
            args=(probe, kind, step, path, since),
            name="stepview-stacks",
            daemon=True,
        ).start()

    def _take_stacks(
        self, probe: StacksProbe, kind: str, step: int, path: str, since: float
    ) -> None:
        """Take the stacks and add them to the recording at ``path`` (still being written, or
        complete already: then appended to)."""
        try:
            cores = list(probe.take(since))
        except Exception as exc:  # a recording without stacks, never a failed one
            log.exception("taking the engine cores' stacks failed")
            cores = [CoreStacks("engine core", self._now(), NONE, why_none=f"failed: {exc!r}")]
        line: dict[str, Any] = {"k": "stacks", "kind": kind, "step": step}
        line["cores"] = [stacks_record(core) for core in cores]
        with self._lock:
            self._probing = False
            if not cores:
                return  # no engine core has started yet
            file = self._file
            if file is not None and file.path == path:
                file.write_lines([line])
            else:
                try:
                    done = LineFile(path, "a")
                except OSError as exc:
                    log.error("cannot add the engine cores' stacks to %s: %s", path, exc)
                    return
                done.write_lines([line])
                done.close_file()
            summary = stacks_summary(cores)
            log.warning("flight recording %s: %s", path, summary)
            if self._last is not None and self._last.path == path:
                self._tell(self._last._replace(stacks=summary))

    def _go_on(self, snapshot: StepSnapshot) -> None:
        """The recording being written takes this snapshot too, until DURATION has passed
        since the last trigger."""
        file, lines = self._file, self._file_lines
        assert file is not None and lines is not None
        file.write_lines(lines.encode(snapshot))
        if snapshot.clock >= self._until or file.error is not None:
            self._close_file()

    def _close_file(self) -> None:
        file, self._file, self._file_lines = self._file, None, None
        if file is None:
            return
        file.close_file()
        if file.error is not None:
            self.error = file.error
        if self._last is not None:
            self._tell(self._last._replace(open=False, stacks=None))

    def _tell(self, dump: FlightDump) -> None:
        self._last = dump
        if self._on_dump is not None:
            try:
                self._on_dump(dump)
            except Exception:
                log.exception("flight recorder's on_dump failed")

    def _new_path(self, kind: str, step: int) -> str:
        """``flight-<UTC time>-<why>-step<N>.jsonl``, made unique within the folder."""
        stamp = datetime.fromtimestamp(self._now(), UTC).strftime("%Y%m%dT%H%M%SZ")
        base = f"flight-{stamp}-{kind}-step{step}"
        path, n = self.folder / f"{base}.jsonl", 1
        while path.exists():
            n += 1
            path = self.folder / f"{base}-{n}.jsonl"
        return os.fspath(path)


def _text(lines: list[dict[str, Any]]) -> str:
    return "".join(dump_line(line) for line in lines)
