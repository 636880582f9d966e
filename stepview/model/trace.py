"""The trace file: a run recorded step by step, to replay later (here or on another machine).

A trace is JSON Lines, written while the engine runs and flushed after every step, so a crash
loses at most the step in flight. Line 1 is a header::

    {"kind": "stepview-trace", "version": 1, "stepview": "0.1.0", "vllm": "0.32.0",
     "model": "...", "engine_args": {...}, "info": {EngineInfo fields}, "created": "..."}

Every later line is an object with a ``"k"`` (kind):

``"event"``
    A user event derived from the snapshots: ``"add"`` (a request appeared: id, prompt,
    params, arrival clock), ``"abort"`` or ``"reject"`` (id, error). Written before the step
    line of the snapshot that showed it. A replay ignores them; tools list them.
``"step"``
    One published snapshot, recording only what changed since the previous step line:
    ``step``, ``clock``, ``state``, ``step_time`` always; ``phase``, ``phase_since``,
    ``info``, ``total_generated`` when they changed; ``counters`` as the changed fields only;
    ``recent`` as the new sparkline entries ``[step, clock, step_time, running, waiting,
    kv_cache_usage, generation_tokens]`` (``recent_cap`` when the window length changes,
    ``recent_reset`` when it had to be rewritten); and requests as *deltas*: ``new`` (appeared
    in ``active``), ``upd`` (its view object changed), ``fin`` (reached a final state) and
    ``gone`` (ids that left ``active`` without finishing; ``order`` if the order changed
    otherwise than by removing and appending).

A request delta is ``{"id": ...}`` plus the fields that differ from the previous view of that
request (for ``new`` and for a ``fin`` flagged ``"n": 1``, from an empty request): ``p``
prompt, ``sp`` the sampling params that differ, ``s`` state, ``tm`` ``[arrival, scheduled,
first_token, finished]``, ``pt``/``cp``/``np`` prompt/computed/preemption counts, ``pi``
prompt token ids, ``pl`` prompt logprobs, ``e`` error, and ``c``: one entry per completion,
``null`` where the completion is the same object as before, else its delta: ``i`` index,
``t+``/``x+``/``l+`` tokens, text and logprob positions appended (``t``/``x``/``l`` replace
them when they do not extend), ``cl`` cumulative logprob, ``f`` finish reason, ``sr`` stop
reason. A logprob position is ``null`` or a list of ``[token_id, logprob, rank, decoded]``. So
a decoding step costs a few dozen bytes per request however long the run, and applying a delta
rebuilds exactly the view that was shown.

Reading shares structure as the driver does: a request that did not change is the same stored
version in consecutive snapshots, token and logprob lists grow behind
:class:`~stepview.model.grow.Frozen` views, and text is kept as appended pieces. Memory grows
with what changed (O(1) per changed request per step), not with steps x requests, nor with
the square of a completion's length. A snapshot is stored as a small row and built into a
:class:`StepSnapshot` when asked for (its ``recent`` tuple alone would be ~1 KB per step).

A file that is not a trace, or a newer version, raises :class:`TraceError`; a truncated or
corrupt line stops reading there and sets :attr:`Trace.warning`, keeping everything before it.
"""

from __future__ import annotations

import json
import os
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from importlib import metadata
from typing import IO, Any, TypeVar

from stepview.model.grow import Frozen, Growing, PrefixView
from stepview.model.history import diff_snapshots
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import (
    Completion,
    EngineCounters,
    EngineInfo,
    EngineState,
    LogprobEntry,
    PositionLogprobs,
    RequestState,
    RequestView,
    StepSnapshot,
    StepStat,
    Timings,
)

TRACE_KIND = "stepview-trace"
TRACE_VERSION = 1

# A header is a few hundred bytes; a first line longer than this is not one (a binary file).
_HEADER_LIMIT = 1 << 20
_COUNTER_FIELDS = tuple(f.name for f in fields(EngineCounters))
_INFO_FIELDS = frozenset(f.name for f in fields(EngineInfo))
# Request views and snapshots kept built (see _Store).
_VIEW_CACHE = 2048
_SNAPSHOT_CACHE = 16
# The state every request delta without a base starts from.
_BLANK = RequestView("", "", SamplingSpec(), RequestState.PENDING, Timings(0.0))

T = TypeVar("T")


# A replay shows each recorded start-up phase for at most this long (seconds at 1x).
STARTUP_GAP_S = 0.5


class TraceError(Exception):
    """The file is not a trace this stepview can read; the message says why."""


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """A user action seen in the trace: ``add``, ``abort`` or ``reject``."""

    kind: str
    step: int
    clock: float  # arrival for ``add``, the final time for ``abort``/``reject``
    request_id: str
    prompt: str | None = None  # ``add`` only
    spec: SamplingSpec | None = None  # ``add`` only
    error: str | None = None  # ``abort``/``reject`` only


def dump_line(obj: Mapping[str, Any]) -> str:
    """One compact JSON line (with its newline), as every trace and results line is written."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str) + "\n"


def stepview_version() -> str:
    """The installed stepview's version, for the header: a trace outlives the code it came from."""
    try:
        return metadata.version("stepview")
    except metadata.PackageNotFoundError:
        return "unknown"


def trace_header(fields: Mapping[str, Any], info: EngineInfo) -> dict[str, Any]:
    """Line 1 of a trace: format and version, what ran (``fields`` from the CLI) and when.

    ``fields`` may carry ``vllm``, ``model``, ``engine_args`` and anything else worth keeping;
    ``vllm`` and ``model`` default to what the engine reported. It cannot override the kind,
    the version or the engine info.
    """
    header: dict[str, Any] = {
        "kind": TRACE_KIND,
        "version": TRACE_VERSION,
        "stepview": stepview_version(),
        "vllm": info.vllm_version,
        "model": info.model,
        "engine_args": {},
    }
    header.update(fields)
    header.update(
        kind=TRACE_KIND,
        version=TRACE_VERSION,
        info=asdict(info),
        created=fields.get("created") or datetime.now(UTC).isoformat(timespec="seconds"),
    )
    return header


# -- encoding ------------------------------------------------------------------------------------


def _positions_out(positions: Sequence[PositionLogprobs | None]) -> list[list[list[Any]] | None]:
    return [
        None if entries is None else [[e.token_id, e.logprob, e.rank, e.decoded] for e in entries]
        for entries in positions
    ]


def _entries_in(entries: Sequence[Sequence[Any]]) -> PositionLogprobs:
    return tuple(LogprobEntry(int(t), float(lp), r, d) for t, lp, r, d in entries)


def _positions_in(data: Sequence[Sequence[Sequence[Any]] | None]) -> list[PositionLogprobs | None]:
    """Prompt logprob positions (the first one is ``None``)."""
    return [None if entries is None else _entries_in(entries) for entries in data]


def _tail(old: Sequence[T], new: Sequence[T]) -> list[T] | None:
    """What ``new`` appended to ``old``, or None when ``new`` does not start with all of ``old``.

    Frozen views of one append-only list (how the driver and the trace reader grow token and
    logprob lists) always extend each other, which is checked in O(1); anything else is
    compared. Only the appended items are touched, so a step costs O(new tokens), not O(length).
    """
    old_len = len(old)
    new_len = len(new)
    if new_len < old_len:
        return None
    shared = isinstance(old, Frozen) and isinstance(new, Frozen) and new.extends(old)
    if old_len and not shared and list(new[:old_len]) != list(old):
        return None
    return [new[i] for i in range(old_len, new_len)]


def _completion_delta(old: Completion | None, new: Completion) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if old is None:
        old = Completion(new.index)
        delta["i"] = new.index
    elif old.index != new.index:
        delta["i"] = new.index
    if new.token_ids is not old.token_ids:
        tokens = _tail(old.token_ids, new.token_ids)
        if tokens is None:
            delta["t"] = list(new.token_ids)
        elif tokens:
            delta["t+"] = tokens
    if new.pieces is not old.pieces:
        if new.pieces.extends(old.pieces):  # O(appended), the usual case for the driver's views
            added = "".join(new.pieces[len(old.pieces) :])
            if added:
                delta["x+"] = added
        else:
            old_text, new_text = old.text, new.text
            if new_text.startswith(old_text):
                if new_text != old_text:
                    delta["x+"] = new_text[len(old_text) :]
            else:
                delta["x"] = new_text
    if new.logprobs is not old.logprobs:
        if new.logprobs is None:
            delta["l"] = None
        else:
            positions = None if old.logprobs is None else _tail(old.logprobs, new.logprobs)
            if positions is None:
                delta["l"] = _positions_out(new.logprobs)
            elif positions:
                delta["l+"] = _positions_out(positions)
    if new.cumulative_logprob != old.cumulative_logprob:
        delta["cl"] = new.cumulative_logprob
    if new.finish_reason != old.finish_reason:
        delta["f"] = new.finish_reason
    if new.stop_reason != old.stop_reason:
        delta["sr"] = new.stop_reason
    return delta


def request_delta(old: RequestView | None, new: RequestView) -> dict[str, Any]:
    """What turns ``old`` (or an empty request) into ``new``; see the module docstring."""
    base = old if old is not None else _BLANK
    delta: dict[str, Any] = {"id": new.request_id}
    if new.prompt != base.prompt:
        delta["p"] = new.prompt
    if new.spec is not base.spec and new.spec != base.spec:
        old_params = base.spec.to_dict()
        delta["sp"] = {k: v for k, v in new.spec.to_dict().items() if v != old_params[k]}
    if new.state is not base.state:
        delta["s"] = new.state.value
    t = new.timings
    if t is not base.timings and t != base.timings:
        delta["tm"] = [t.arrival, t.scheduled, t.first_token, t.finished]
    if new.prompt_tokens != base.prompt_tokens:
        delta["pt"] = new.prompt_tokens
    if new.computed_prompt_tokens != base.computed_prompt_tokens:
        delta["cp"] = new.computed_prompt_tokens
    if new.num_preemptions != base.num_preemptions:
        delta["np"] = new.num_preemptions
    if new.prompt_token_ids is not base.prompt_token_ids and (
        new.prompt_token_ids != base.prompt_token_ids
    ):
        delta["pi"] = list(new.prompt_token_ids)
    if new.prompt_logprobs is not base.prompt_logprobs and (
        new.prompt_logprobs != base.prompt_logprobs
    ):
        delta["pl"] = None if new.prompt_logprobs is None else _positions_out(new.prompt_logprobs)
    if new.error != base.error:
        delta["e"] = new.error
    if new.completions is not base.completions:
        old_completions = base.completions
        delta["c"] = [
            None
            if i < len(old_completions) and old_completions[i] is c
            else _completion_delta(old_completions[i] if i < len(old_completions) else None, c)
            for i, c in enumerate(new.completions)
        ]
    return delta


def _stat_out(s: StepStat) -> list[Any]:
    return [
        s.step,
        s.clock,
        s.step_time,
        s.running,
        s.waiting,
        s.kv_cache_usage,
        s.generation_tokens,
    ]


class TraceEncoder:
    """Turns each published snapshot into the trace lines that record what changed.

    Pure and stateful: it remembers the previous snapshot, and must see every snapshot of a
    run, in order, after a header written with ``info``.
    """

    def __init__(self, info: EngineInfo) -> None:
        self._info = info
        self._prev: StepSnapshot | None = None
        self._recent_cap: int | None = None

    def encode(self, snapshot: StepSnapshot) -> list[dict[str, Any]]:
        """The event lines (possibly none) and the step line for ``snapshot``, in file order."""
        prev = self._prev
        self._prev = snapshot
        line: dict[str, Any] = {
            "k": "step",
            "step": snapshot.step,
            "clock": snapshot.clock,
            "state": snapshot.engine_state.value,
            "step_time": snapshot.step_time,
        }
        if prev is None or snapshot.phase != prev.phase:
            line["phase"] = snapshot.phase
        if prev is None or snapshot.phase_since != prev.phase_since:
            line["phase_since"] = snapshot.phase_since
        if snapshot.info is not self._info and snapshot.info != self._info:
            self._info = snapshot.info
            line["info"] = asdict(snapshot.info)
        old_counters = prev.counters if prev is not None else EngineCounters()
        counters = snapshot.counters
        if counters is not old_counters:
            changed = {
                name: getattr(counters, name)
                for name in _COUNTER_FIELDS
                if getattr(counters, name) != getattr(old_counters, name)
            }
            if changed:
                line["counters"] = changed
        if prev is None or snapshot.total_generated != prev.total_generated:
            line["total_generated"] = snapshot.total_generated
        self._encode_recent(prev.recent if prev is not None else (), snapshot.recent, line)
        events = self._encode_requests(prev, snapshot, line)
        events.append(line)
        return events

    def _encode_recent(
        self, old: tuple[StepStat, ...], new: tuple[StepStat, ...], line: dict[str, Any]
    ) -> None:
        """Append-only with a bounded window, like the driver's deque: write the new tail."""
        if new is old or (not new and not old):
            return
        kept = len(new)
        if old:
            last = old[-1]
            while kept and new[kept - 1] is not last:
                kept -= 1
            consistent = 0 < kept <= len(old) and new[0] is old[len(old) - kept]
        else:
            kept, consistent = 0, True
        if not consistent:
            line["recent"] = [_stat_out(s) for s in new]
            line["recent_reset"] = True
            return
        appended = new[kept:]
        if appended:
            line["recent"] = [_stat_out(s) for s in appended]
        grown = len(old) + len(appended)
        expected = grown if self._recent_cap is None else min(self._recent_cap, grown)
        if len(new) != expected:
            self._recent_cap = len(new)
            line["recent_cap"] = len(new)

    def _encode_requests(
        self, prev: StepSnapshot | None, snapshot: StepSnapshot, line: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """Fill the request deltas into ``line``; return the event lines they imply."""
        diff = diff_snapshots(prev, snapshot)
        events: list[dict[str, Any]] = []
        step = snapshot.step
        if diff.added:
            line["new"] = [request_delta(None, view) for view in diff.added]
            events.extend(_add_event(step, view) for view in diff.added)
        if diff.changed:
            line["upd"] = [request_delta(old, new) for old, new in diff.changed]
        removed = {view.request_id: view for view in diff.removed}
        if diff.finished:
            finished = []
            for view in diff.finished:
                base = removed.pop(view.request_id, None)
                entry = request_delta(base, view)
                if base is None:
                    entry["n"] = 1
                    events.append(_add_event(step, view))
                finished.append(entry)
            line["fin"] = finished
            events.extend(
                {
                    "k": "event",
                    "event": "abort" if view.state is RequestState.ABORTED else "reject",
                    "step": step,
                    "clock": view.timings.finished,
                    "id": view.request_id,
                    "error": view.error,
                }
                for view in diff.finished
                if view.state in (RequestState.ABORTED, RequestState.REJECTED)
            )
        if removed:
            line["gone"] = list(removed)
        if prev is not None:
            # The reader keeps the previous order, drops what left and appends what is new.
            left = {view.request_id for view in diff.removed}
            expected = [v.request_id for v in prev.active if v.request_id not in left]
            expected.extend(v.request_id for v in diff.added)
            actual = [v.request_id for v in snapshot.active]
            if actual != expected:
                line["order"] = actual
        return events


def _add_event(step: int, view: RequestView) -> dict[str, Any]:
    return {
        "k": "event",
        "event": "add",
        "step": step,
        "clock": view.timings.arrival,
        "id": view.request_id,
        "prompt": view.prompt,
        "params": view.spec.to_dict(),
    }


# -- decoding ------------------------------------------------------------------------------------


class _TextLog:
    """One completion's text as it grew, kept as the pieces appended step by step.

    If every version of a completion held its own text so far, replaying long completions
    would take memory quadratic in their length (the driver's bounded history can afford that,
    a whole trace cannot). A version keeps ``(log, length)`` instead, and the text is joined
    only when a snapshot showing it is built.
    """

    __slots__ = ("_joined", "_parts", "length")

    def __init__(self, text: str = "") -> None:
        self._parts = [text]
        # The text of the first N parts, as one pair so a single store replaces it: the reader
        # thread and the UI thread may both extend it, and either result is consistent.
        self._joined: tuple[str, int] = (text, 1)
        self.length = len(text)

    def append(self, piece: str) -> None:
        self._parts.append(piece)
        self.length += len(piece)

    def text(self, length: int) -> str:
        """The first ``length`` characters (safe while the reader thread appends)."""
        joined, count = self._joined
        if len(joined) < length:
            total = len(self._parts)
            joined += "".join(self._parts[count:total])
            self._joined = (joined, total)
        return joined if len(joined) == length else joined[:length]


@dataclass(frozen=True, slots=True, eq=False)
class _Sample:
    """Where one completion version's lists and text live (shared with its other versions)."""

    tokens: Growing[int]
    logprobs: Growing[PositionLogprobs] | None
    text: _TextLog
    text_len: int


@dataclass(frozen=True, slots=True, eq=False)
class _Request:
    """One version of a request as the reader stores it: a view whose completions have no text
    (``samples`` says where their text is), so storing a version costs O(1) whatever its length.

    Hashed by identity: the materialized view is cached per version.
    """

    view: RequestView
    samples: tuple[_Sample, ...]


@dataclass(frozen=True, slots=True)
class _Row:
    """One snapshot minus what can be rebuilt from shared lists (``finished``, ``recent``)."""

    step: int
    clock: float
    play_clock: float  # ``clock`` with the engine's start-up shortened (see STARTUP_GAP_S)
    engine_state: EngineState
    info: EngineInfo
    phase: str
    phase_since: float
    step_time: float
    counters: EngineCounters
    active: tuple[_Request, ...]
    finished_len: int
    recent_end: int
    recent_len: int
    total_generated: int


def _grown(owned: Growing[T] | None, items: Sequence[T]) -> Growing[T]:
    growing = owned if owned is not None else Growing[T]()
    growing.extend(items)
    return growing


def _apply_completion(
    old: Completion | None, sample: _Sample | None, delta: Mapping[str, Any]
) -> tuple[Completion, _Sample]:
    base = old if old is not None else Completion(delta["i"])
    tokens = sample.tokens if sample is not None else None
    if "t" in delta:
        tokens = _grown(None, [int(t) for t in delta["t"]])
    elif "t+" in delta or tokens is None:
        tokens = _grown(tokens, [int(t) for t in delta.get("t+", ())])
    logprobs = sample.logprobs if sample is not None else None
    if "l" in delta:
        data = delta["l"]
        logprobs = None if data is None else _grown(None, [_entries_in(p) for p in data])
    elif "l+" in delta:
        logprobs = _grown(logprobs, [_entries_in(p) for p in delta["l+"]])
    if "x" in delta:
        text = _TextLog(str(delta["x"]))
    elif sample is None:
        text = _TextLog(str(delta.get("x+", "")))
    else:
        text = sample.text
        if "x+" in delta:
            if sample.text_len != text.length:
                raise ValueError("text appended to an old version")
            text.append(str(delta["x+"]))
    completion = Completion(
        index=int(delta.get("i", base.index)),
        token_ids=tokens.view(),
        cumulative_logprob=delta.get("cl", base.cumulative_logprob),
        logprobs=logprobs.view() if logprobs is not None else None,
        finish_reason=delta.get("f", base.finish_reason),
        stop_reason=delta.get("sr", base.stop_reason),
    )
    return completion, _Sample(tokens, logprobs, text, text.length)


def _apply_request_delta(old: _Request | None, delta: Mapping[str, Any]) -> _Request:
    """The inverse of :func:`request_delta`, from one stored version to the next."""
    base = old.view if old is not None else _BLANK
    samples = old.samples if old is not None else ()
    completions = base.completions
    if "c" in delta:
        new_completions: list[Completion] = []
        new_samples: list[_Sample] = []
        for i, entry in enumerate(delta["c"]):
            old_c = completions[i] if i < len(completions) else None
            old_s = samples[i] if i < len(samples) else None
            if entry is None:
                if old_c is None or old_s is None:
                    raise ValueError(f"completion {i} of {delta['id']!r} has no previous state")
                new_completions.append(old_c)
                new_samples.append(old_s)
            else:
                completion, sample = _apply_completion(old_c, old_s, entry)
                new_completions.append(completion)
                new_samples.append(sample)
        completions, samples = tuple(new_completions), tuple(new_samples)
    timings = base.timings
    if "tm" in delta:
        arrival, scheduled, first_token, finished = delta["tm"]
        timings = Timings(float(arrival), scheduled, first_token, finished)
    prompt_logprobs = base.prompt_logprobs
    if "pl" in delta:
        data = delta["pl"]
        prompt_logprobs = None if data is None else tuple(_positions_in(data))
    view = RequestView(
        request_id=str(delta["id"]),
        prompt=str(delta.get("p", base.prompt)),
        spec=(
            SamplingSpec.from_dict({**base.spec.to_dict(), **delta["sp"]})
            if "sp" in delta
            else base.spec
        ),
        state=RequestState(delta["s"]) if "s" in delta else base.state,
        timings=timings,
        prompt_tokens=int(delta.get("pt", base.prompt_tokens)),
        computed_prompt_tokens=int(delta.get("cp", base.computed_prompt_tokens)),
        num_preemptions=int(delta.get("np", base.num_preemptions)),
        prompt_token_ids=(
            tuple(int(t) for t in delta["pi"]) if "pi" in delta else base.prompt_token_ids
        ),
        prompt_logprobs=prompt_logprobs,
        completions=completions,
        error=delta.get("e", base.error),
    )
    return _Request(view, samples)


def _with_text(request: _Request) -> RequestView:
    """The full view of a stored version (its completions' text joined in)."""
    view = request.view
    if not any(s.text_len for s in request.samples):
        return view
    completions = tuple(
        c._replace(pieces=Frozen([s.text.text(s.text_len)])) if s.text_len else c
        for c, s in zip(view.completions, request.samples, strict=True)
    )
    return view._replace(completions=completions)


def _stat_in(data: Sequence[Any]) -> StepStat:
    step, clock, step_time, running, waiting, kv_cache_usage, generation_tokens = data
    return StepStat(
        int(step),
        float(clock),
        float(step_time),
        int(running),
        int(waiting),
        float(kv_cache_usage),
        int(generation_tokens),
    )


def info_from_dict(data: Mapping[str, Any]) -> EngineInfo:
    """An :class:`EngineInfo` from its dict; fields a later version added are ignored."""
    return EngineInfo(**{k: v for k, v in data.items() if k in _INFO_FIELDS})


class _Store:
    """Everything the rows of one trace share: finished views, sparkline entries, rows.

    The lists are append-only, so a :class:`TraceSnapshots` view of a prefix stays valid while
    the reader keeps appending (on the replay thread) and the UI reads. Building a snapshot
    joins text, so the views built recently are cached: consecutive snapshots then share the
    view of every request that did not change between them, as the driver's do.
    """

    def __init__(self) -> None:
        self.rows: list[_Row] = []
        self.finished: list[RequestView] = []
        self.stats: list[StepStat] = []
        self._lock = threading.Lock()
        self._views: OrderedDict[_Request, RequestView] = OrderedDict()
        self._snapshots: OrderedDict[int, StepSnapshot] = OrderedDict()

    def _view(self, request: _Request) -> RequestView:
        if not any(s.text_len for s in request.samples):
            return request.view
        views = self._views
        view = views.get(request)
        if view is None:
            view = views[request] = _with_text(request)
            if len(views) > _VIEW_CACHE:
                views.popitem(last=False)
        else:
            views.move_to_end(request)
        return view

    def snapshot(self, index: int) -> StepSnapshot:
        with self._lock:
            snapshot = self._snapshots.get(index)
            if snapshot is not None:
                self._snapshots.move_to_end(index)
                return snapshot
            row = self.rows[index]
            snapshot = StepSnapshot(
                step=row.step,
                clock=row.clock,
                engine_state=row.engine_state,
                info=row.info,
                phase=row.phase,
                phase_since=row.phase_since,
                step_time=row.step_time,
                counters=row.counters,
                active=tuple(self._view(r) for r in row.active),
                finished=Frozen(self.finished, row.finished_len),
                recent=tuple(self.stats[row.recent_end - row.recent_len : row.recent_end]),
                total_generated=row.total_generated,
            )
            self._snapshots[index] = snapshot
            if len(self._snapshots) > _SNAPSHOT_CACHE:
                self._snapshots.popitem(last=False)
            return snapshot


class TraceSnapshots(PrefixView[StepSnapshot]):
    """The first ``length`` snapshots of a trace, each built when indexed.

    Building one costs a tuple of the sparkline window and joining the text of the requests
    that changed; the last few built are cached, so indexing the same snapshot again (or the
    next one) is cheap and shares objects, but a snapshot indexed long ago may come back as an
    equal, new object: hold on to the one you show.
    """

    __slots__ = ("_store",)

    def __init__(self, store: _Store, length: int) -> None:
        super().__init__(length)
        self._store = store

    def _at(self, index: int) -> StepSnapshot:
        return self._store.snapshot(index)

    def step_at(self, index: int) -> int:
        """The engine step of snapshot ``index``, without building it."""
        return self._store.rows[index].step

    def play_clock_at(self, index: int) -> float:
        """When snapshot ``index`` is due in a replay at 1x, without building it.

        That is the recorded driver clock, except that the engine's start-up (minutes for a
        large model on a GPU box) plays in at most :data:`STARTUP_GAP_S` per phase.
        """
        return self._store.rows[index].play_clock

    def index_of_step(self, step: int) -> int:
        """The first snapshot published after engine step ``step`` (clamped to the last one)."""
        index = bisect_left(self._store.rows, step, hi=self._length, key=_row_step)
        return max(0, min(index, self._length - 1))

    def last_index_at(self, play_clock: float, lo: int = 0) -> int:
        """The last snapshot due at or before ``play_clock`` (at least ``lo``)."""
        index = bisect_right(self._store.rows, play_clock, lo=lo, hi=self._length, key=_row_play)
        return max(lo, index - 1)


def _row_step(row: _Row) -> int:
    return row.step


def _row_play(row: _Row) -> float:
    return row.play_clock


@dataclass(slots=True)
class Trace:
    """A trace as read so far: header, snapshots, events, and why reading stopped early."""

    header: dict[str, Any]
    path: str | None = None
    events: list[TraceEvent] = field(default_factory=list)
    warning: str | None = None  # set when a truncated or corrupt line ended reading
    complete: bool = False  # the whole file has been read (or reading stopped at a bad line)
    _store: _Store = field(default_factory=_Store, repr=False)

    @property
    def snapshots(self) -> TraceSnapshots:
        """The snapshots read so far, oldest first (a fixed-length view)."""
        return TraceSnapshots(self._store, len(self._store.rows))

    @property
    def info(self) -> EngineInfo:
        """The engine as the header describes it."""
        return info_from_dict(self.header.get("info") or {})

    @property
    def version(self) -> int:
        return int(self.header["version"])


def check_header(obj: object, name: str) -> dict[str, Any]:
    """``obj`` as a trace header, or a :class:`TraceError` saying what ``name`` is instead."""
    if not isinstance(obj, dict):
        raise TraceError(f"{name} is not a stepview trace (line 1 is not a JSON object)")
    kind = obj.get("kind")
    if kind != TRACE_KIND:
        found = "no" if kind is None else repr(kind)
        raise TraceError(
            f"{name} is not a stepview trace (line 1 has {found} kind, expected {TRACE_KIND!r})"
        )
    version = obj.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise TraceError(f"{name}: unknown trace version {version!r}")
    if version > TRACE_VERSION:
        raise TraceError(
            f"{name} is trace version {version}, written by a newer stepview "
            f"({obj.get('stepview', '?')}); this stepview reads version {TRACE_VERSION}"
        )
    if not isinstance(obj.get("info", {}), dict):
        raise TraceError(f"{name}: the header's engine info is not a JSON object")
    return obj


class _Decoder:
    """Applies step and event lines, in order, to the reader's state."""

    def __init__(self, trace: Trace) -> None:
        self._trace = trace
        self._store = trace._store
        self._info = trace.info
        self._active: dict[str, _Request] = {}
        self._active_versions: tuple[_Request, ...] = ()
        self._counters = EngineCounters()
        self._phase = ""
        self._phase_since = 0.0
        self._total_generated = 0
        self._recent_end = 0
        self._recent_len = 0
        self._recent_cap: int | None = None

    def apply(self, line: Mapping[str, Any]) -> None:
        kind = line["k"]
        if kind == "step":
            self._step(line)
        elif kind == "event":
            self._event(line)
        # Other kinds are additions a later v1 writer may make; a reader skips them.

    def _event(self, line: Mapping[str, Any]) -> None:
        params = line.get("params")
        self._trace.events.append(
            TraceEvent(
                kind=str(line["event"]),
                step=int(line["step"]),
                clock=float(line["clock"]),
                request_id=str(line["id"]),
                prompt=line.get("prompt"),
                spec=SamplingSpec.from_dict(params) if params is not None else None,
                error=line.get("error"),
            )
        )

    def _step(self, line: Mapping[str, Any]) -> None:
        if "info" in line:
            self._info = info_from_dict(line["info"])
        self._phase = str(line.get("phase", self._phase))
        self._phase_since = float(line.get("phase_since", self._phase_since))
        self._total_generated = int(line.get("total_generated", self._total_generated))
        if "counters" in line:
            self._counters = replace(self._counters, **line["counters"])
        self._recent(line)
        self._requests(line)
        store = self._store
        clock = float(line["clock"])
        previous = store.rows[-1] if store.rows else None
        if previous is None:
            play_clock = min(clock, STARTUP_GAP_S)
        else:
            gap = clock - previous.clock
            if previous.engine_state is EngineState.STARTING:
                gap = min(gap, STARTUP_GAP_S)
            play_clock = previous.play_clock + gap
        store.rows.append(
            _Row(
                step=int(line["step"]),
                clock=clock,
                play_clock=play_clock,
                engine_state=EngineState(line["state"]),
                info=self._info,
                phase=self._phase,
                phase_since=self._phase_since,
                step_time=float(line["step_time"]),
                counters=self._counters,
                active=self._active_versions,
                finished_len=len(store.finished),
                recent_end=self._recent_end,
                recent_len=self._recent_len,
                total_generated=self._total_generated,
            )
        )

    def _recent(self, line: Mapping[str, Any]) -> None:
        stats = self._store.stats
        appended = [_stat_in(s) for s in line.get("recent", ())]
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
        touched = False
        for request_id in line.get("gone", ()):
            del active[request_id]
            touched = True
        for delta in line.get("fin", ()):
            base = None if delta.get("n") else active.pop(delta["id"])
            self._store.finished.append(_with_text(_apply_request_delta(base, delta)))
            touched = touched or base is not None
        for delta in line.get("upd", ()):
            active[delta["id"]] = _apply_request_delta(active[delta["id"]], delta)
            touched = True
        for delta in line.get("new", ()):
            if delta["id"] in active:
                raise ValueError(f"request {delta['id']!r} is already active")
            active[delta["id"]] = _apply_request_delta(None, delta)
            touched = True
        if "order" in line:
            order = line["order"]
            if sorted(order) != sorted(active):
                raise ValueError("order does not list the active requests")
            self._active = active = {request_id: active[request_id] for request_id in order}
            touched = True
        if touched:
            self._active_versions = tuple(active.values())


class TraceReader:
    """Reads a trace file into a :class:`Trace`: all at once, or a chunk of lines at a time.

    Opening reads and checks the header, so a file that is not a trace (or is a newer
    version) fails at once with :class:`TraceError`; :meth:`read` then never raises for bad
    content: it stops at the first truncated or corrupt line and sets ``trace.warning``.
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

    def _read_header(self, name: str) -> object:
        raw = self._file.readline(_HEADER_LIMIT)
        if not raw:
            raise TraceError(f"{name} is not a stepview trace (it is empty)")
        try:
            return json.loads(raw.decode("utf-8"))
        except ValueError:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
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
                decoder.apply(json.loads(raw))
            except Exception as exc:  # whatever a damaged line makes fail, it is that line's fault
                self._stop_at(raw, exc)
                return True
        return False

    def _stop_at(self, raw: bytes, exc: Exception) -> None:
        trace = self.trace
        snapshots = trace.snapshots
        what = f"corrupt ({type(exc).__name__}: {exc})" if raw.endswith(b"\n") else "truncated"
        loaded = f"loaded {len(snapshots)} snapshots"
        if snapshots:
            loaded += f" (to step {snapshots.step_at(len(snapshots) - 1)})"
        trace.warning = f"line {self._line_no} is {what}; {loaded}"
        trace.complete = True
        self.close()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a whole trace (see :class:`TraceReader` for what raises and what only warns)."""
    with TraceReader(path) as reader:
        reader.read()
        return reader.trace
