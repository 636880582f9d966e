"""A trace in memory: what the reader stores per step, and the snapshots built from it.

Reading shares structure as the driver does: a request that did not change is the same stored
version in consecutive snapshots, token and logprob lists grow behind
:class:`~stepview.model.grow.Frozen` views, and text is kept as appended pieces. Memory grows
with what changed (O(1) per changed request per step), not with steps x requests, nor with
the square of a completion's length. A snapshot is stored as a small :class:`Row` and built
into a :class:`StepSnapshot` when asked for (its ``recent`` tuple alone would be ~1 KB per
step); the few built last are cached, behind a lock, because the replay thread appends while
the UI thread builds.

The reader (:mod:`stepview.trace.reader`) fills these; playback and the UI only read them.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from stepview.model.grow import Frozen, Growing, PrefixView
from stepview.model.snapshot import (
    EngineInfo,
    PositionLogprobs,
    RecentStep,
    RequestView,
    StepSnapshot,
)
from stepview.model.stacks import RecordedStacks
from stepview.trace.format import TraceEvent, info_from_dict

# A replay shows each recorded start-up phase for at most this long (seconds at 1x).
STARTUP_GAP_S = 0.5
# Request views and snapshots kept built (see Store).
_VIEW_CACHE = 2048
_SNAPSHOT_CACHE = 16


class TextLog:
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
class Sample:
    """Where one completion version's lists and text live (shared with its other versions)."""

    tokens: Growing[int]
    logprobs: Growing[PositionLogprobs] | None
    text: TextLog
    text_len: int


@dataclass(frozen=True, slots=True, eq=False)
class StoredRequest:
    """One version of a request as the reader stores it: a view whose completions have no text
    (``samples`` says where their text is), so storing a version costs O(1) whatever its length.

    Hashed by identity: the materialized view is cached per version.
    """

    view: RequestView
    samples: tuple[Sample, ...]


@dataclass(frozen=True, slots=True)
class Row:
    """One snapshot minus what can be rebuilt from shared lists (``finished``, ``recent``).

    ``head`` is the snapshot itself with no requests and no sparkline window: every other
    field is there as read, so building the snapshot replaces just those three and cannot
    leave a field behind.
    """

    head: StepSnapshot  # its ``active``, ``finished`` and ``recent`` are empty
    play_clock: float  # ``clock`` with the engine's start-up shortened (see STARTUP_GAP_S)
    active: tuple[StoredRequest, ...]
    finished_len: int
    recent_end: int
    recent_len: int


def with_text(request: StoredRequest) -> RequestView:
    """The full view of a stored version (its completions' text joined in)."""
    view = request.view
    if not any(s.text_len for s in request.samples):
        return view
    completions = tuple(
        c._replace(pieces=Frozen([s.text.text(s.text_len)])) if s.text_len else c
        for c, s in zip(view.completions, request.samples, strict=True)
    )
    return view._replace(completions=completions)


class Store:
    """Everything the rows of one trace share: finished views, sparkline entries, rows.

    The lists are append-only, so a :class:`TraceSnapshots` view of a prefix stays valid while
    the reader keeps appending (on the replay thread) and the UI reads. Building a snapshot
    joins text, so the views built recently are cached: consecutive snapshots then share the
    view of every request that did not change between them, as the driver's do.
    """

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.finished: list[RequestView] = []
        self.stats: list[RecentStep] = []
        self._lock = threading.Lock()
        self._views: OrderedDict[StoredRequest, RequestView] = OrderedDict()
        self._snapshots: OrderedDict[int, StepSnapshot] = OrderedDict()

    def _view(self, request: StoredRequest) -> RequestView:
        if not any(s.text_len for s in request.samples):
            return request.view
        views = self._views
        view = views.get(request)
        if view is None:
            view = views[request] = with_text(request)
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
            snapshot = replace(
                row.head,
                active=tuple(self._view(r) for r in row.active),
                finished=Frozen(self.finished, row.finished_len),
                recent=tuple(self.stats[row.recent_end - row.recent_len : row.recent_end]),
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

    def __init__(self, store: Store, length: int) -> None:
        super().__init__(length)
        self._store = store

    def _at(self, index: int) -> StepSnapshot:
        return self._store.snapshot(index)

    def step_at(self, index: int) -> int:
        """The engine step of snapshot ``index``, without building it."""
        return self._store.rows[index].head.step

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


def _row_step(row: Row) -> int:
    return row.head.step


def _row_play(row: Row) -> float:
    return row.play_clock


@dataclass(slots=True)
class Trace:
    """A trace as read so far: header, snapshots, events, and why reading stopped early."""

    header: dict[str, Any]
    path: str | None = None
    events: list[TraceEvent] = field(default_factory=list)
    stacks: list[RecordedStacks] = field(default_factory=list)
    """A flight recording's engine-core stacks (``stacks`` lines), in the order read."""
    warning: str | None = None  # set when a truncated or corrupt line ended reading
    complete: bool = False  # the whole file has been read (or reading stopped at a bad line)
    store: Store = field(default_factory=Store, repr=False)
    """What the snapshots are built from; only the reader appends to it."""

    @property
    def snapshots(self) -> TraceSnapshots:
        """The snapshots read so far, oldest first (a fixed-length view)."""
        return TraceSnapshots(self.store, len(self.store.rows))

    @property
    def info(self) -> EngineInfo:
        """The engine as the header describes it."""
        return info_from_dict(self.header.get("info") or {})

    @property
    def version(self) -> int:
        return int(self.header["version"])
