"""A request's life as a strip over steps, in its detail view: answers "why is X slow?".

The segments come from :mod:`stepview.insight.timeline`, fed with the history the app keeps
(a live run's bounded ``history()``, or the trace a replay has read). :class:`StripTracker`
feeds only the snapshots it has not seen, so redrawing the detail view of a long run costs the
new steps, not the whole history; it starts over when the snapshot it stopped at is gone (the
bounded history dropped it), and then says whether the history still reaches back to the
request's arrival.

The strip is one cell per step (or per few steps), coloured by state; under it ``▲`` marks
the step on screen and a line the row chosen with ``,``/``.``, which Enter shows (the app
moves its history there, see :class:`StepChosen`), then that row in words. The rows under the
strip are the timeline's stretches (:mod:`stepview.insight.stretches`): a request that waited
100 steps for reasons flipping every step is one row, which ``e`` expands into its segments.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from itertools import groupby
from typing import Final, NamedTuple

from textual.message import Message

from stepview.insight.segments import DECODE, PREEMPTED, PREFILL, WAITING, Segment
from stepview.insight.stretches import Stretch, breakdown, label, stretches
from stepview.insight.timeline import RequestTimeline, TimelineTracker
from stepview.model.snapshot import StepSnapshot
from stepview.ui.display import percent

STATE_STYLES: Final = {
    WAITING: "$warning",
    PREFILL: "$primary",
    DECODE: "$success",
    PREEMPTED: "$error",
}
FINISHED_STYLE: Final = "$secondary"
_MUTED: Final = "$text-muted"
_PLAIN: Final = "$foreground"
_BLOCK: Final = "█"
_Part = str | tuple[str, str]


class StepChosen(Message):
    """Show step ``step``: the app moves its history (or the replay) there."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step


class StripTracker:
    """One request's timeline, kept up to date from a history that grows at its end."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self._tracker = TimelineTracker(only=request_id)
        self._fed: StepSnapshot | None = None
        self.kept_from: int | None = None
        """The history's first step when it no longer reaches back to the request's arrival."""

    def update(self, history: Sequence[StepSnapshot]) -> RequestTimeline | None:
        """Feed the snapshots after the last one fed (all of them if it was dropped)."""
        start = self._resume_at(history)
        if start is None:
            self._tracker = TimelineTracker(only=self.request_id)
            start = 0
            self.kept_from = _kept_from(history, self.request_id)
        for snapshot in history[start:]:
            self._tracker.observe(snapshot)
        if len(history) > start:
            self._fed = history[-1]
        return self._tracker.get(self.request_id)

    def _resume_at(self, history: Sequence[StepSnapshot]) -> int | None:
        fed = self._fed
        if fed is None:
            return None
        for index in range(len(history) - 1, -1, -1):
            if history[index] is fed:
                return index + 1
        return None


def _kept_from(history: Sequence[StepSnapshot], request_id: str) -> int | None:
    """The first kept step, if the request had arrived before it (its start is not kept)."""
    if not history:
        return None
    first = history[0]
    view = first.find(request_id)
    if view is None or first.step == 0:
        return None
    return first.step if view.timings.arrival < first.clock - first.step_time else None


def chunks(history: Sequence[StepSnapshot], request_id: str, segment: Segment) -> list[int]:
    """The tokens the request was given in each step of a prefill ``segment``."""
    out = []
    for snapshot in history:
        if segment.first_step <= snapshot.step <= segment.last_step:
            view = snapshot.find(request_id)
            if view is not None and view.scheduled_tokens:
                out.append(view.scheduled_tokens)
    return out


def segment_text(segment: Segment, history: Sequence[StepSnapshot], request_id: str) -> str:
    """What a segment did: tokens prefilled (per chunk), generated or lost, or why it waited."""
    if segment.state == PREFILL:
        parts = chunks(history, request_id, segment)
        each = f" ({'+'.join(map(str, parts))})" if len(parts) > 1 else ""
        return f"{segment.tokens} prompt tok{each}"
    if segment.state == DECODE:
        return f"{segment.tokens} tok generated"
    if segment.state == PREEMPTED:
        reason = f", then {segment.reason}" if segment.reason else ""
        return f"{segment.tokens} computed tok lost{reason}"
    return segment.reason or "queued"


class Row(NamedTuple):
    """One row under the strip: a stretch, or one segment of an expanded stretch."""

    stretch: Stretch
    key: int  # the index of its stretch's first segment: what ``e`` expands or collapses
    inner: bool = False  # a segment of an expanded stretch
    open: bool = False  # a stretch shown expanded (its segments follow)

    @property
    def parts(self) -> int:
        """How many segments it stands for (more than one: it can be expanded)."""
        return len(self.stretch.segments)


def rows_of(timeline: RequestTimeline | None, expanded: Collection[int]) -> list[Row]:
    """The rows of ``timeline``: one per stretch, and after each stretch whose key is in
    ``expanded`` one per segment of it."""
    out: list[Row] = []
    if timeline is None:
        return out
    for stretch in stretches(timeline.segments):
        key = stretch.first
        grown = key in expanded and len(stretch.segments) > 1
        out.append(Row(stretch, key, open=grown))
        if grown:
            out += (
                Row(Stretch((segment,), key + at), key, inner=True)
                for at, segment in enumerate(stretch.segments)
            )
    return out


def row_at(rows: Sequence[Row], step: int) -> int | None:
    """The index of the (finest) row holding ``step`` (else the first row)."""
    found = None
    for index, row in enumerate(rows):
        if row.stretch.first_step <= step or found is None:
            found = index
    return found


def row_text(row: Row, history: Sequence[StepSnapshot], request_id: str) -> str:
    """What a row did: its segment's :func:`segment_text`, or for a stretch of several the
    steps per reason (and, for a preemption, the tokens it lost)."""
    stretch = row.stretch
    if row.parts == 1:
        return segment_text(stretch.segments[0], history, request_id)
    lost = stretch.segments[0].tokens
    said = breakdown(stretch, compact=True)
    if stretch.state == PREEMPTED:
        said = f"{lost} computed tok lost, then {said}"
    return f"{said} {'▾' if row.open else '▸'} {row.parts} segments"


def row_label(row: Row, history: Sequence[StepSnapshot], request_id: str) -> str:
    """The chosen row in words: ``waiting 0.86 s, steps 17-117: behind 71 steps, kv_cache
    11, token_budget 2`` (:func:`~stepview.insight.stretches.label`)."""
    stretch = row.stretch
    if stretch.state == WAITING:
        return label(stretch)
    if stretch.state == PREEMPTED:
        lost = stretch.segments[0].tokens
        return label(stretch, f"{lost} computed tok lost, then {breakdown(stretch)}")
    return label(stretch, segment_text(stretch.segments[0], history, request_id))


def _steps(stretch: Stretch) -> str:
    if stretch.first_step == stretch.last_step:
        return f"step {stretch.first_step}"
    return f"steps {stretch.first_step}-{stretch.last_step}"


def _bar(
    timeline: RequestTimeline, width: int, shown_step: int, chosen: Stretch | None
) -> list[_Part]:
    """The coloured strip, then a line marking the shown step and the chosen segment."""
    segments = timeline.segments
    first, last = segments[0].first_step, segments[-1].last_step
    span = last - first + 1
    cells = max(1, min(width - 2, span * max(1, (width - 2) // span)))

    def step_at(cell: int) -> int:
        return first + cell * span // cells

    def cell_of(step: int) -> int:
        return (step - first) * cells // span

    parts: list[_Part] = []
    at = 0
    for cell in range(cells):
        step = step_at(cell)
        while at + 1 < len(segments) and segments[at + 1].first_step <= step:
            at += 1
        parts.append((_BLOCK, STATE_STYLES.get(segments[at].state, _MUTED)))
    if timeline.done:
        parts.append(("✓", f"bold {FINISHED_STYLE}"))
    marks = [" "] * (cells + 1)
    if chosen is not None:
        for cell in range(cell_of(chosen.first_step), cell_of(chosen.last_step + 1)):
            marks[min(cell, cells)] = "─"
    if first <= shown_step <= last:
        marks[cell_of(shown_step)] = "▲"
    parts.append("\n")
    # Runs of marks and of spaces apart: a styled run must not start with spaces (screenshots).
    for mark, run in groupby(marks):
        text = "".join(run)
        parts.append(text if mark == " " else (text, "bold $accent"))
    parts.append("\n")
    return parts


def legend() -> list[_Part]:
    parts: list[_Part] = []
    for state, style in (*STATE_STYLES.items(), ("finished", FINISHED_STYLE)):
        parts += [(_BLOCK if state != "finished" else "✓", style), " ", (state, _MUTED), "  "]
    parts += [("▲", "bold $accent"), " ", ("step on screen", _MUTED), "\n"]
    return parts


def strip_parts(
    timeline: RequestTimeline | None,
    history: Sequence[StepSnapshot],
    *,
    rows: Sequence[Row],
    width: int,
    shown_step: int,
    chosen: int | None,
    kept_from: int | None,
) -> list[_Part]:
    """The "Timeline" section of the detail view: strip, legend, rows, preemptions."""
    parts: list[_Part] = ["\n", ("Timeline", "bold $primary")]
    hint = "(, . choose · e expands a stretch · enter shows its first step)"
    parts += [" ", (hint, _MUTED), "\n"]
    if kept_from is not None:
        note = f"history starts at step {kept_from}: earlier steps are gone (--history)"
        parts += [(note, "$warning"), "\n"]
    if timeline is None or not timeline.segments or not rows:
        return [*parts, ("no step of this request in the history kept", _MUTED), "\n"]
    picked = rows[chosen] if chosen is not None and chosen < len(rows) else None
    parts += _bar(timeline, width, shown_step, None if picked is None else picked.stretch)
    if picked is not None:
        parts += [(row_label(picked, history, timeline.request_id), "bold"), "\n"]
    parts += legend()
    for row in rows:
        stretch = row.stretch
        style = STATE_STYLES.get(stretch.state, _MUTED)
        row_style = "reverse" if row is picked else ""
        if row.inner:  # a plain run: a styled one must not start with spaces (screenshots)
            parts.append("  ")
        parts += [
            (_BLOCK, style),
            " ",
            (f"{stretch.state:<9} {_steps(stretch):<11}", f"bold {row_style}".strip()),
            " ",
            (f"{stretch.start:.3f}-{stretch.end:.3f}s", _MUTED),
            " ",
            (row_text(row, history, timeline.request_id), _PLAIN),
            "\n",
        ]
    if timeline.done and timeline.view is not None:
        end = timeline.view.timings.finished
        when = "" if end is None else f" at {end:.3f}s"
        parts += [("✓", FINISHED_STYLE), " ", (f"{timeline.view.state.value}{when}", "bold"), "\n"]
    for p in timeline.preemptions:
        kv = f"KV {percent(p.kv_usage_before)} → {percent(p.kv_usage_after)}"
        parts += [
            ("preempted", "bold $error"),
            " ",
            (f"step {p.step}", "bold"),
            " ",
            (f"{p.computed_tokens_lost} computed tok lost", _PLAIN),
            " ",
            (kv, _MUTED),
            "\n",
        ]
    return parts
