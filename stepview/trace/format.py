"""The trace file: a run recorded step by step, to replay later (here or on another machine).

A trace is JSON Lines, written while the engine runs and flushed after every step, so a crash
loses at most the step in flight. Line 1 is a header::

    {"kind": "stepview-trace", "version": 2, "stepview": "0.1.0", "vllm": "0.32.0",
     "model": "...", "engine_args": {...}, "info": {EngineInfo fields}, "created": "..."}

Every later line is an object with a ``"k"`` (kind):

``"event"``
    A user event derived from the snapshots: ``"add"`` (a request appeared: id, prompt,
    params, arrival clock), ``"abort"`` or ``"reject"`` (id, error). Written before the step
    line of the snapshot that showed it. A replay ignores them; tools list them.
``"alert"``
    A problem the run's detectors raised (:mod:`stepview.model.alerts`), with the keys of the
    run's summary (:func:`~stepview.model.alerts.alert_record`): ``kind`` (``thrash``,
    ``stall``, ``kv_full``, ``stuck``), ``step``, ``clock``, ``request_id`` (or null) and ``text``.
    Earlier lines named the kind ``alert`` and the request ``id``; they still read. Written
    after the step line that first showed it. Readers that do not know the kind skip it (so
    version-1 readers read these traces). A replay takes the alerts that hold from the step
    lines' ``alerts``; a trace without them shows each alert line's alert at the step it was
    raised.
``"stacks"``
    A flight recording's engine cores' thread stacks, taken when it was written or extended
    (:mod:`stepview.model.stacks`): ``kind`` and ``step`` of that trigger, and ``cores``, one
    object per core with ``core`` (pid and name), ``taken`` (wall clock), ``how`` (``asked``,
    ``hung step``, ``watchdog``, ``in process``; ``none`` with ``why_none`` saying why there
    are none), ``text`` (faulthandler's dump, as written), ``note``, ``names`` (thread names
    by hex ident) and ``step_thread`` (the thread that runs the core's steps). It follows the
    step lines written meanwhile. A replay lists them (``K``); older readers skip the line.
``"step"``
    One published snapshot, recording only what changed since the previous step line. Its
    snapshot-level fields are the table of :mod:`stepview.trace.step_fields`, one entry per
    field of the snapshot: ``step``, ``clock``, ``state``, ``step_time`` always; ``phase``,
    ``phase_since``, ``info``, ``total_generated`` when they changed; ``counters`` as the
    changed fields only; ``budget`` and ``alerts`` (version 2, below); ``ranks`` a watched
    data-parallel server's engine cores, ``[rank, connected, running, waiting, kv_cache_usage]``
    each, and ``arrivals`` the scheduled requests ``[arrived, total]`` (a synthetic load's
    "12/40 arrived"), and ``qr`` (version 3) the reason each engine core's waiting queue shares,
    ``[code, text, blocker]`` or ``null`` each, when they changed. Then ``recent`` as the new
    sparkline entries ``[step, clock, step_time, running, waiting, kv_cache_usage,
    generation_tokens]`` (``recent_cap`` when the window length changes, ``recent_reset`` when
    it had to be rewritten); and requests as *deltas*: ``new`` (appeared in ``active``), ``upd``
    (its view object changed), ``fin`` (reached a final state) and ``gone`` (ids that left
    ``active`` without finishing; ``order`` if the order changed otherwise than by removing and
    appending).

A request delta is ``{"id": ...}`` plus the fields that differ from the previous view of that
request (for ``new`` and for a ``fin`` flagged ``"n": 1``, from :data:`BLANK_REQUEST`): ``p``
prompt, ``sp`` the sampling params that differ, ``s`` state, ``tm`` ``[arrival, scheduled,
first_token, finished]``, ``pt``/``cp``/``np`` prompt/computed/preemption counts, ``pi``
prompt token ids, ``pl`` prompt logprobs, ``e`` error, and ``c``: one entry per completion,
``null`` where the completion is the same object as before, else its delta: ``i`` index,
``t+``/``x+``/``l+`` tokens, text and logprob positions appended (``t``/``x``/``l`` replace
them when they do not extend), ``cl`` cumulative logprob, ``f`` finish reason, ``sr`` stop
reason. Version 2 adds what the scheduler decided: per request ``wr`` its wait reason
``[code, text, blocker]`` (``null`` when it has none; from version 3 only a reason of its
own, the others waiting for the step's ``qr``, so a waiting request costs nothing per step;
``q`` the queue, when not the first), ``st`` its tokens scheduled this step,
``kv``/``kp`` the KV blocks it holds now / at most, ``cc`` prompt tokens from the prefix
cache, ``ln`` its lineage ``[parent, kind, completion, token]`` (written once, in the delta
that first shows the request: a clone or fork never changes parent), ``m`` a chat request's
messages ``[[role, content], ...]`` (written once, like ``ln``), ``tc`` the W3C
``traceparent`` its spans join (written once, like ``ln``), ``ci`` another client's
request's id on its server (written once, like ``ln``; older traces have none); per step ``budget``
``[max_tokens, prefill, decode, free_blocks, total_blocks]`` when it changed (``null`` once
it is unknown) and ``alerts`` the alerts that hold, ``[kind, step, clock, text, request_id]``
each, when they changed (so a replay shows them when and as long as the live run did). A
logprob position is ``null`` or a list of ``[token_id, logprob, rank, decoded]``. So a decoding
step costs a few dozen bytes per request however long the run, and applying a delta rebuilds
exactly the view that was shown.

How the format evolves: a reader skips what it does not know (a line kind, a key of a step
line or of a request delta), and a key a line does not carry keeps its value from the lines
before (in a trace that never wrote it, its default). So a field an older reader can do
without joins the current version, and a trace that has it still replays in an older
stepview, without it: lineage, the step lines' ``alerts``, ``ranks`` and ``arrivals`` joined
version 2 so, and the traces recorded before each replay as they did. The version changes
when an older reader would misread a trace (a key whose meaning changes, a delta it would
apply wrongly, as ``wr`` did in version 3): a reader refuses a version newer than its own
(:func:`check_header`).

This module holds what both directions share: the header, the errors, and the codecs of the
small values (a line, a logprob position, a sparkline entry, a request's scheduling figures).
The snapshot-level fields are :mod:`stepview.trace.step_fields`; writing deltas is
:mod:`stepview.trace.encoder`, reading them back :mod:`stepview.trace.reader`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from typing import Any

from stepview.model.alerts import Alert, alert_from_record, alert_record
from stepview.model.lineage import Lineage, LineageKind
from stepview.model.sampling import SamplingSpec
from stepview.model.scheduling import WaitReason
from stepview.model.snapshot import (
    EngineInfo,
    LogprobEntry,
    PositionLogprobs,
    RecentStep,
    RequestState,
    RequestView,
    Timings,
)
from stepview.version import installed_version

TRACE_KIND = "stepview-trace"
TRACE_VERSION = 3
"""Version 2 added what the scheduler decided (module docstring); version 3 the reason the
waiting queue shares (``qr``), which a request's own ``wr`` no longer repeats: an older reader
would show those requests waiting without a reason, so it is told the trace is newer. Version
1 and 2 traces still read (their requests carry every reason themselves)."""

_INFO_FIELDS = frozenset(f.name for f in fields(EngineInfo))

BLANK_REQUEST = RequestView("", "", SamplingSpec(), RequestState.PENDING, Timings(0.0))
"""The state every request delta without a base starts from (and is encoded against)."""


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


def alert_line(alert: Alert) -> dict[str, Any]:
    """The ``alert`` line of a raised alert: its :func:`~stepview.model.alerts.alert_record`."""
    return {"k": "alert", **alert_record(alert)}


def alert_in(line: Mapping[str, Any]) -> Alert:
    """The alert of an ``alert`` line (the inverse of :func:`alert_line`).

    Lines written before the trace shared the summary's keys name the kind ``alert`` and the
    request ``id``; they read as well.
    """
    if "kind" in line:
        return alert_from_record(line)
    return alert_from_record({**line, "kind": line["alert"], "request_id": line.get("id")})


def dump_line(obj: Mapping[str, Any]) -> str:
    """One compact JSON line (with its newline), as every trace and results line is written."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str) + "\n"


# -- the header ----------------------------------------------------------------------------------


def stepview_version() -> str:
    """The installed stepview's version, for the header: a trace outlives the code it came from."""
    return installed_version()


def trace_header(fields: Mapping[str, Any], info: EngineInfo) -> dict[str, Any]:
    """Line 1 of a trace: format and version, what ran (``fields`` from the caller) and when.

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


def info_from_dict(data: Mapping[str, Any]) -> EngineInfo:
    """An :class:`EngineInfo` from its dict; fields a later version added are ignored."""
    return EngineInfo(**{k: v for k, v in data.items() if k in _INFO_FIELDS})


# -- small values --------------------------------------------------------------------------------


def positions_out(positions: Sequence[PositionLogprobs | None]) -> list[list[list[Any]] | None]:
    """Logprob positions as the trace writes them: ``[token_id, logprob, rank, decoded]``."""
    return [
        None if entries is None else [[e.token_id, e.logprob, e.rank, e.decoded] for e in entries]
        for entries in positions
    ]


def entries_in(entries: Sequence[Sequence[Any]]) -> PositionLogprobs:
    """One position of :func:`positions_out`, read back."""
    return tuple(LogprobEntry(int(t), float(lp), r, d) for t, lp, r, d in entries)


def positions_in(data: Sequence[Sequence[Sequence[Any]] | None]) -> list[PositionLogprobs | None]:
    """The inverse of :func:`positions_out` (prompt logprobs: the first position is ``None``)."""
    return [None if entries is None else entries_in(entries) for entries in data]


def stat_out(s: RecentStep) -> list[Any]:
    """A sparkline entry as a list, in the order the module docstring gives."""
    return [
        s.step,
        s.clock,
        s.step_time,
        s.running,
        s.waiting,
        s.kv_cache_usage,
        s.generation_tokens,
    ]


def stat_in(data: Sequence[Any]) -> RecentStep:
    """The inverse of :func:`stat_out`."""
    step, clock, step_time, running, waiting, kv_cache_usage, generation_tokens = data
    return RecentStep(
        int(step),
        float(clock),
        float(step_time),
        int(running),
        int(waiting),
        float(kv_cache_usage),
        int(generation_tokens),
    )


# -- what the scheduler decided (version 2) --------------------------------------------------


def scheduling_out(new: RequestView, base: RequestView, delta: dict[str, Any]) -> None:
    """Write into ``delta`` the scheduler's figures of ``new`` that differ from ``base``'s."""
    if new.wait_reason != base.wait_reason:
        reason = new.wait_reason
        delta["wr"] = None if reason is None else [reason.code, reason.text, reason.blocker]
    if new.scheduled_tokens != base.scheduled_tokens:
        delta["st"] = new.scheduled_tokens
    if new.kv_blocks != base.kv_blocks:
        delta["kv"] = new.kv_blocks
    if new.peak_kv_blocks != base.peak_kv_blocks:
        delta["kp"] = new.peak_kv_blocks
    if new.cached_prompt_tokens != base.cached_prompt_tokens:
        delta["cc"] = new.cached_prompt_tokens
    if new.queue != base.queue:
        delta["q"] = new.queue


def scheduling_in(delta: Mapping[str, Any], base: RequestView) -> dict[str, Any]:
    """The inverse of :func:`scheduling_out`: ``RequestView`` fields (``base``'s when absent)."""
    reason = base.wait_reason
    if "wr" in delta:
        data = delta["wr"]
        reason = None if data is None else WaitReason(str(data[0]), str(data[1]), data[2])
    return {
        "wait_reason": reason,
        "scheduled_tokens": int(delta.get("st", base.scheduled_tokens)),
        "kv_blocks": int(delta.get("kv", base.kv_blocks)),
        "peak_kv_blocks": int(delta.get("kp", base.peak_kv_blocks)),
        "cached_prompt_tokens": int(delta.get("cc", base.cached_prompt_tokens)),
        "queue": int(delta.get("q", base.queue)),
    }


def lineage_out(lineage: Lineage | None) -> list[Any] | None:
    """A request's lineage as the trace writes it (``ln``)."""
    if lineage is None:
        return None
    return [lineage.parent, lineage.kind.value, lineage.completion, lineage.token]


def lineage_in(data: Sequence[Any] | None) -> Lineage | None:
    """The inverse of :func:`lineage_out`."""
    if data is None:
        return None
    parent, kind, completion, token = data
    return Lineage(str(parent), LineageKind(kind), int(completion), token)
