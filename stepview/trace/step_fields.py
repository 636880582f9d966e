"""The step-level fields of a step line: one table, so no field of a snapshot is left out.

A step line records a :class:`~stepview.model.snapshot.StepSnapshot` as what changed since
the previous step line. The requests (``active``, ``finished``) and the sparkline window
(``recent``) travel as deltas (:data:`DELTA_FIELDS`: the encoder writes them, the reader and
:mod:`~stepview.trace.deltas` apply them); every other field of the snapshot is one
:class:`StepField` of :data:`STEP_FIELDS`: its key in the line, how it is written and how it
is read back. The encoder writes these fields and the reader reads them through this table
alone, and a test checks that the table's names and :data:`DELTA_FIELDS` are exactly
``dataclasses.fields(StepSnapshot)``: a field added to the snapshot and not here fails that
test, where before it vanished from every recording without a word.

Both ends start from :func:`start_snapshot` (the header's engine, nothing else). A field is
written when it differs from the previous snapshot's (the first line's, from the start
snapshot's), so a step costs an identity or equality test per field, and bytes only for what
changed; ``counters``, a new object every step, writes only the figures that changed.
``step``, ``clock``, ``state`` and ``step_time`` are in every line (``always``), and the reader
requires them. The reader folds each line onto the previous line's values, so a field absent
from a line, or from a whole older trace, keeps its value (or its default).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, fields, replace
from operator import attrgetter
from typing import Any, NamedTuple

from stepview.model.alerts import Alert
from stepview.model.scheduling import StepBudget, WaitReason
from stepview.model.server_window import Latency, ServerWindow
from stepview.model.snapshot import (
    ArrivalCount,
    EngineCounters,
    EngineInfo,
    EngineState,
    RankStatus,
    StepSnapshot,
)
from stepview.trace.format import info_from_dict

DELTA_FIELDS = ("active", "finished", "recent")
"""The snapshot's fields written as deltas by the encoder, not through :data:`STEP_FIELDS`."""

_COUNTER_FIELDS = tuple(f.name for f in fields(EngineCounters))
_COUNTER_NAMES = frozenset(_COUNTER_FIELDS)


class StepField(NamedTuple):
    """How one field of :class:`StepSnapshot` is written into a step line and read back."""

    name: str  # the StepSnapshot field
    key: str  # its key in a step line
    write: Callable[[Any, Any], Any] | None  # (value, the previous one) -> JSON; None: as it is
    read: Callable[[Any, Any], Any]  # (the line's value, the previous one) -> value
    always: bool = False  # in every step line, changed or not (the reader requires it)


def start_snapshot(info: EngineInfo) -> StepSnapshot:
    """The picture before a trace's first step line: the header's engine, nothing else yet.

    The encoder writes the first step line against it and the reader reads it onto it, so
    both ends agree on what an absent field means. A replay shows it while the trace loads.
    """
    return StepSnapshot(step=0, clock=0.0, engine_state=EngineState.STARTING, info=info)


def write_step_fields(previous: StepSnapshot, snapshot: StepSnapshot, line: dict[str, Any]) -> None:
    """Put into ``line`` the fields of ``snapshot`` that changed since ``previous``.

    Runs on the engine thread after every step: the values come out of both snapshots in one
    call each, and an identity test settles most fields, an equality test of a few small
    values the rest.
    """
    for (key, write), value in zip(_ALWAYS_WRITE, _always_values(snapshot), strict=True):
        line[key] = value if write is None else write(value, None)
    for (key, write), value, old in zip(
        _CHANGED_WRITE, _changed_values(snapshot), _changed_values(previous), strict=True
    ):
        if value is not old and value != old:
            line[key] = value if write is None else write(value, old)


def read_step_fields(line: Mapping[str, Any], previous: StepSnapshot) -> StepSnapshot:
    """``previous`` with the fields ``line`` carries; its deltas are the caller's to apply.

    Raises (``KeyError``, ``ValueError``, ``TypeError``) on a line without the ``always``
    fields or with a value that does not read: the reader counts the line as damaged.
    """
    changes = {
        name: read(line[key], getattr(previous, name))
        for name, key, _write, read, always in STEP_FIELDS
        if always or key in line
    }
    return replace(previous, **changes)


# -- the values ----------------------------------------------------------------------------------


def _int(data: Any, _previous: Any) -> int:
    return int(data)


def _float(data: Any, _previous: Any) -> float:
    return float(data)


def _str(data: Any, _previous: Any) -> str:
    return str(data)


def counters_out(counters: EngineCounters, previous: EngineCounters) -> dict[str, Any]:
    """The engine's figures that differ from the previous step's, by name."""
    return {
        name: getattr(counters, name)
        for name in _COUNTER_FIELDS
        if getattr(counters, name) != getattr(previous, name)
    }


def counters_in(data: Mapping[str, Any], previous: EngineCounters) -> EngineCounters:
    """The inverse of :func:`counters_out` (a figure this stepview does not know is skipped)."""
    return replace(previous, **{k: v for k, v in data.items() if k in _COUNTER_NAMES})


def budget_out(budget: StepBudget | None, _previous: object = None) -> list[int] | None:
    """``[max_tokens, prefill, decode, free_blocks, total_blocks]``, null once unknown."""
    return None if budget is None else list(budget)


def budget_in(data: Sequence[int] | None, _previous: object = None) -> StepBudget | None:
    """The inverse of :func:`budget_out`."""
    return None if data is None else StepBudget(*(int(v) for v in data[:5]))


def alerts_out(alerts: Sequence[Alert], _previous: object = None) -> list[list[Any]]:
    """The alerts that hold after the step: each one's fields as a list, in :class:`Alert`'s
    field order (the names :func:`~stepview.model.alerts.alert_record` gives them)."""
    return [list(a) for a in alerts]


def alerts_in(data: Sequence[Sequence[Any]], _previous: object = None) -> tuple[Alert, ...]:
    """The inverse of :func:`alerts_out`."""
    return tuple(
        Alert(str(k), int(step), float(clock), str(text), rid) for k, step, clock, text, rid in data
    )


def ranks_out(ranks: Sequence[RankStatus], _previous: object = None) -> list[list[Any]]:
    """A watched server's engine cores: ``[rank, connected, running, waiting,
    kv_cache_usage]`` each (:class:`RankStatus`'s field order)."""
    return [list(r) for r in ranks]


def ranks_in(data: Sequence[Sequence[Any]], _previous: object = None) -> tuple[RankStatus, ...]:
    """The inverse of :func:`ranks_out` (figures a later version appends are skipped)."""
    return tuple(
        RankStatus(int(rank), bool(connected), int(running), int(waiting), float(usage))
        for rank, connected, running, waiting, usage, *_ in data
    )


def arrivals_out(arrivals: ArrivalCount, _previous: object = None) -> list[int]:
    """Scheduled requests ``[arrived, total]``."""
    return list(arrivals)


def arrivals_in(data: Sequence[int], _previous: object = None) -> ArrivalCount:
    """The inverse of :func:`arrivals_out`."""
    arrived, total, *_ = data
    return ArrivalCount(int(arrived), int(total))


def reason_out(reason: WaitReason | None, _previous: object = None) -> list[Any] | None:
    """A wait reason as ``[code, text, blocker]`` (null: none), as requests' ``wr`` are."""
    return None if reason is None else [reason.code, reason.text, reason.blocker]


def reason_in(data: Sequence[Any] | None, _previous: object = None) -> WaitReason | None:
    """The inverse of :func:`reason_out`."""
    return None if data is None else WaitReason(str(data[0]), str(data[1]), data[2])


def reasons_out(reasons: Sequence[WaitReason | None], _previous: object = None) -> list[Any]:
    """What each engine core's waiting queue shares, one :func:`reason_out` each."""
    return [reason_out(r) for r in reasons]


def reasons_in(data: Sequence[Any], _previous: object = None) -> tuple[WaitReason | None, ...]:
    """The inverse of :func:`reasons_out`."""
    return tuple(reason_in(r) for r in data)


def server_out(window: ServerWindow | None, _previous: object = None) -> dict[str, Any] | None:
    """A ``/metrics`` watch's window by field name (null: not such a watch)."""
    return None if window is None else asdict(window)


def server_in(data: Mapping[str, Any] | None, _previous: object = None) -> ServerWindow | None:
    """The inverse of :func:`server_out`."""
    if data is None:
        return None

    def pairs(key: str) -> tuple[tuple[str, int], ...]:
        return tuple((str(name), int(count)) for name, count in data.get(key, ()))

    return replace(
        ServerWindow(str(data["address"]), float(data["span"])),
        **{k: v for k, v in data.items() if k not in _SERVER_NESTED},
        latencies=tuple(Latency(*latency) for latency in data.get("latencies", ())),
        waiting_by_reason=pairs("waiting_by_reason"),
        finished=pairs("finished"),
    )


_SERVER_NESTED = frozenset({"latencies", "waiting_by_reason", "finished"})


def _state_out(state: EngineState, _previous: object) -> str:
    return state.value


def _state_in(data: Any, _previous: object) -> EngineState:
    return EngineState(data)


def _info_out(info: EngineInfo, _previous: object) -> dict[str, Any]:
    return asdict(info)


def _info_in(data: Mapping[str, Any], _previous: object) -> EngineInfo:
    return info_from_dict(data)


STEP_FIELDS: tuple[StepField, ...] = (
    StepField("step", "step", None, _int, always=True),
    StepField("clock", "clock", None, _float, always=True),
    StepField("engine_state", "state", _state_out, _state_in, always=True),
    StepField("step_time", "step_time", None, _float, always=True),
    StepField("phase", "phase", None, _str),
    StepField("phase_since", "phase_since", None, _float),
    StepField("info", "info", _info_out, _info_in),
    StepField("counters", "counters", counters_out, counters_in),
    StepField("total_generated", "total_generated", None, _int),
    StepField("alerts", "alerts", alerts_out, alerts_in),
    StepField("budget", "budget", budget_out, budget_in),
    StepField("ranks", "ranks", ranks_out, ranks_in),
    StepField("arrivals", "arrivals", arrivals_out, arrivals_in),
    StepField("queue_reasons", "qr", reasons_out, reasons_in),
    StepField("server", "server", server_out, server_in),
)
"""Every field of :class:`StepSnapshot` but :data:`DELTA_FIELDS`, in the order a step line
writes them. ``ranks`` and ``arrivals`` came late to version 2: older traces have neither, and
replay with no ranks and no scheduled arrivals, as the runs they recorded showed.
``queue_reasons`` (``qr``) are version 3's: before it, every waiting request carried its reason
itself."""

# What write_step_fields loops over, taken out of the table once.
_ALWAYS = [f for f in STEP_FIELDS if f.always]
_CHANGED = [f for f in STEP_FIELDS if not f.always]
_ALWAYS_WRITE = tuple((f.key, f.write) for f in _ALWAYS)
_CHANGED_WRITE = tuple((f.key, f.write) for f in _CHANGED)
_always_values = attrgetter(*(f.name for f in _ALWAYS))
_changed_values = attrgetter(*(f.name for f in _CHANGED))
