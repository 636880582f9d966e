"""Reading a trace: open and check the file, decode its lines, fill a :class:`Trace`.

Decoding applies each line's deltas to the previous stored version of each request (the
inverse of :func:`~stepview.trace.encoder.request_delta`), appending to the trace's
:class:`~stepview.trace.store.Store`. A file that is not a trace, or a newer version, raises
:class:`~stepview.trace.format.TraceError` when opened. A damaged line in the middle (not
JSON, or contradicting the lines before it) is skipped and the rest is read; a truncated last
line (a crash mid-write) ends reading; :attr:`Trace.warning` says which line and how many were
skipped. A large trace is read a chunk of lines at a time, between playback ticks.

After a skipped line the decoder is *lenient*: that line's deltas are lost, so a later line
may update a request it never added, or finish one that is not active; such a request is
rebuilt from its ``add`` event plus the later deltas. A strict decoder (no damage yet) treats
the same contradictions as damage, since nothing excuses them.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import IO, Any, TypeVar

from stepview.model.errors import describe
from stepview.model.outside_text import may_hold_surrogates, mend_surrogates
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, Timings
from stepview.model.stacks import recorded_stacks
from stepview.trace.deltas import apply_request_delta
from stepview.trace.format import (
    BLANK_REQUEST,
    TraceError,
    TraceEvent,
    alert_in,
    check_header,
    stat_in,
)
from stepview.trace.step_fields import read_step_fields, start_snapshot
from stepview.trace.store import (
    STARTUP_GAP_S,
    Row,
    StoredRequest,
    Trace,
    with_text,
)

log = logging.getLogger(__name__)

# A header is a few hundred bytes; a first line longer than this is not one (a binary file).
_HEADER_LIMIT = 1 << 20

T = TypeVar("T")


class _Decoder:
    """Applies step and event lines, in order, to the reader's state."""

    def __init__(self, trace: Trace) -> None:
        self._trace = trace
        self._store = trace.store
        self._head = start_snapshot(trace.info)  # the step-level fields as of the last line
        self._active: dict[str, StoredRequest] = {}
        self._active_versions: tuple[StoredRequest, ...] = ()
        self._alerts_on_steps = False  # the step lines carry ``alerts`` (see _alert)
        self._recent_end = 0
        self._recent_len = 0
        self._recent_cap: int | None = None
        self._added: dict[str, TraceEvent] = {}  # the add event of every request, by id
        self.lenient = False
        """Set once a line was skipped: see the module docstring."""

    def apply(self, line: Mapping[str, Any]) -> None:
        kind = line["k"]
        if kind == "step":
            self._step(line)
        elif kind == "event":
            self._event(line)
        elif kind == "alert":
            self._alert(line)
        elif kind == "stacks":
            self._trace.stacks.append(recorded_stacks(line))
        # Other kinds are additions a later v1 writer may make; a reader skips them.

    def _event(self, line: Mapping[str, Any]) -> None:
        params = line.get("params")
        event = TraceEvent(
            kind=str(line["event"]),
            step=int(line["step"]),
            clock=float(line["clock"]),
            request_id=str(line["id"]),
            prompt=line.get("prompt"),
            spec=SamplingSpec.from_dict(params) if params is not None else None,
            error=line.get("error"),
        )
        self._trace.events.append(event)
        if event.kind == "add":
            self._added[event.request_id] = event

    def _alert(self, line: Mapping[str, Any]) -> None:
        """A trace whose step lines say which alerts hold needs no alert line; one written
        before they did shows each alert at the step that raised it (the line follows it)."""
        rows = self._store.rows
        if self._alerts_on_steps or not rows:
            return
        head = rows[-1].head
        rows[-1] = replace(rows[-1], head=replace(head, alerts=(*head.alerts, alert_in(line))))

    def _step(self, line: Mapping[str, Any]) -> None:
        # Read first: a step-level value that does not read leaves everything as it was.
        head = read_step_fields(line, self._head)
        if "alerts" in line:
            self._alerts_on_steps = True
        self._recent(line)
        self._requests(line)
        self._head = head
        store = self._store
        clock = head.clock
        previous = store.rows[-1] if store.rows else None
        if previous is None:
            play_clock = min(clock, STARTUP_GAP_S)
        else:
            gap = clock - previous.head.clock
            if previous.head.engine_state is EngineState.STARTING:
                gap = min(gap, STARTUP_GAP_S)
            play_clock = previous.play_clock + gap
        store.rows.append(
            Row(
                head=head,
                play_clock=play_clock,
                active=self._active_versions,
                finished_len=len(store.finished),
                recent_end=self._recent_end,
                recent_len=self._recent_len,
            )
        )

    def _recent(self, line: Mapping[str, Any]) -> None:
        stats = self._store.stats
        appended = [stat_in(s) for s in line.get("recent", ())]
        if "recent_cap" in line:
            self._recent_cap = int(line["recent_cap"])
        stats.extend(appended)
        self._recent_end = len(stats)
        if line.get("recent_reset"):
            self._recent_len = len(appended)
            return
        grown = self._recent_len + len(appended)
        self._recent_len = grown if self._recent_cap is None else min(self._recent_cap, grown)

    def _requests(self, line: Mapping[str, Any]) -> None:
        active = self._active
        lenient = self.lenient
        touched = False
        for request_id in line.get("gone", ()):
            if lenient:
                active.pop(request_id, None)
            else:
                del active[request_id]
            touched = True
        for delta in line.get("fin", ()):
            was_active = delta["id"] in active
            base = None if delta.get("n") else self._base(delta["id"], remove=True)
            self._store.finished.append(with_text(self._apply(base, delta)))
            touched = touched or was_active
        for delta in line.get("upd", ()):
            active[delta["id"]] = self._apply(self._base(delta["id"], remove=False), delta)
            touched = True
        for delta in line.get("new", ()):
            if delta["id"] in active and not lenient:
                raise ValueError(f"request {delta['id']!r} is already active")
            active[delta["id"]] = self._apply(None, delta)
            touched = True
        if "order" in line:
            order = line["order"]
            if sorted(order) != sorted(active):
                if not lenient:
                    raise ValueError("order does not list the active requests")
                order = [rid for rid in order if rid in active]
                order += [rid for rid in active if rid not in set(order)]
            self._active = active = {request_id: active[request_id] for request_id in order}
            touched = True
        if touched:
            self._active_versions = tuple(active.values())

    def _base(self, request_id: str, *, remove: bool) -> StoredRequest:
        """The active version a delta applies to (taken out of ``active`` when ``remove``).

        Strict, a request that is not active is damage (``KeyError``); lenient, it is one
        whose earlier deltas were on a skipped line, rebuilt from its add event.
        """
        active = self._active
        found = active.pop(request_id, None) if remove else active.get(request_id)
        if found is not None:
            return found
        if not self.lenient:
            raise KeyError(request_id)
        return self._recovered(request_id)

    def _apply(self, base: StoredRequest | None, delta: Mapping[str, Any]) -> StoredRequest:
        """Apply ``delta``; lenient, one that does not fit its base is applied afresh."""
        if not self.lenient:
            return apply_request_delta(base, delta)
        try:
            return apply_request_delta(base, delta, lenient=True)
        except Exception:
            if base is None:
                raise
            return apply_request_delta(self._recovered(delta["id"]), delta, lenient=True)

    def _recovered(self, request_id: str) -> StoredRequest:
        """What is known of a request without its lost deltas: its add event, if any."""
        added = self._added.get(request_id)
        view = BLANK_REQUEST._replace(request_id=request_id)
        if added is not None:
            view = view._replace(
                prompt=added.prompt or "",
                spec=added.spec or view.spec,
                timings=Timings(added.clock),
            )
        return StoredRequest(view, ())


class TraceReader:
    """Reads a trace file into a :class:`Trace`: all at once, or a chunk of lines at a time.

    Opening reads and checks the header, so a file that is not a trace (or is a newer
    version) fails at once with :class:`TraceError`; :meth:`read` then never raises for bad
    content: it skips a corrupt line, stops at a truncated last one, and says so in
    ``trace.warning`` (the first damaged line and why, how many were skipped).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        name = os.fspath(path)
        try:
            self._file: IO[bytes] = open(name, "rb")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise TraceError(f"cannot open trace {name}: {exc.strerror or exc}") from None
        try:
            header = check_header(self._read_header(name), name)
        except BaseException:
            self._file.close()
            raise
        self.trace = Trace(header=header, path=name)
        self._decoder = _Decoder(self.trace)
        self._line_no = 1
        self._skipped: list[int] = []  # line numbers of the damaged lines skipped
        self._first_damage = ""  # what the first one was, and what was loaded before it
        self._loaded_before = ""

    def _read_header(self, name: str) -> object:
        raw = self._file.readline(_HEADER_LIMIT)
        if not raw:
            raise TraceError(f"{name} is not a stepview trace (it is empty)")
        try:
            return _loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):  # not UTF-8, not JSON, nested past Python's reach
            raise TraceError(f"{name} is not a stepview trace (line 1 is not JSON)") from None

    def read(self, max_lines: int | None = None) -> bool:
        """Decode up to ``max_lines`` more lines (all if ``None``); True once reading is over."""
        trace = self.trace
        if trace.complete:
            return True
        count = 0
        decoder = self._decoder
        readline = self._file.readline
        while max_lines is None or count < max_lines:
            raw = readline()
            if not raw:
                trace.complete = True
                self.close()
                return True
            count += 1
            self._line_no += 1
            if not raw.strip():
                continue
            try:
                decoder.apply(_loads(raw))
            except Exception as exc:  # whatever a damaged line makes fail, it is that line's fault
                if not raw.endswith(b"\n"):  # the last line, cut short: nothing follows
                    self._stop_at()
                    return True
                self._skip(exc)
        return False

    def _loaded(self) -> str:
        snapshots = self.trace.snapshots
        loaded = f"loaded {len(snapshots)} snapshots"
        if snapshots:
            loaded += f" (to step {snapshots.step_at(len(snapshots) - 1)})"
        return loaded

    def _skip(self, exc: Exception) -> None:
        """Skip the current line (damaged), say so, and read on leniently.

        The warning leads with what the status bar has room for: the first damaged line and
        how many were skipped; the exception's text (a JSON parser's column) goes to the log.
        """
        skipped = self._skipped
        skipped.append(self._line_no)
        log.info("%s: line %d skipped: %s", self.trace.path, self._line_no, describe(exc))
        if len(skipped) == 1:
            self._first_damage = f"line {self._line_no} is corrupt ({type(exc).__name__})"
            self._loaded_before = self._loaded()
            self._decoder.lenient = True
        count = len(skipped)
        lines = ", ".join(map(str, skipped[:5])) + (", ..." if count > 5 else "")
        which = "it" if count == 1 else f"{count} damaged lines ({lines})"
        self.trace.warning = (
            f"{self._first_damage}; skipped {which}, played the rest; "
            f"{self._loaded_before} before it"
        )

    def _stop_at(self) -> None:
        trace = self.trace
        if self._skipped:
            trace.warning = f"{trace.warning}; line {self._line_no} (the last) is truncated"
        else:
            trace.warning = f"line {self._line_no} is truncated; {self._loaded()}"
        trace.complete = True
        self.close()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _loads(raw: bytes | str) -> Any:
    """One line's JSON, any lone surrogate in it mended: stepview never writes one, and a
    string holding one could not be written anywhere again (an export, a rerun's results)."""
    value = json.loads(raw)
    return mend_surrogates(value) if may_hold_surrogates(raw) else value


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a whole trace (see :class:`TraceReader` for what raises and what only warns)."""
    with TraceReader(path) as reader:
        reader.read()
        return reader.trace
