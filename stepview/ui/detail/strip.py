"""A request's life as a strip over steps, in its detail view: answers "why is X slow?".

The segments come from :mod:`stepview.insight.timeline`, fed with the history the app keeps
(a live run's bounded ``history()``, or the trace a replay has read). :class:`StripTracker`
feeds only the snapshots it has not seen, so redrawing the detail view of a long run costs the
new steps, not the whole history; it starts over when the snapshot it stopped at is gone (the
bounded history dropped it), and then says whether the history still reaches back to the
request's arrival.

The strip is one cell per step (or per few steps), coloured by state; under it ``▲`` marks
the step on screen and a line the segment chosen with ``,``/``.``, which Enter shows (the app
moves its history there, see :class:`StepChosen`).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Final

from textual.message import Message

from stepview.insight.segments import DECODE, PREEMPTED, PREFILL, WAITING, Segment
from stepview.insight.timeline import RequestTimeline, TimelineTracker
from stepview.model.snapshot import StepSnapshot
from stepview.ui.format import percent

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


def _steps(segment: Segment) -> str:
    if segment.first_step == segment.last_step:
        return f"step {segment.first_step}"
    return f"steps {segment.first_step}-{segment.last_step}"


def _bar(
    timeline: RequestTimeline, width: int, shown_step: int, chosen: Segment | None
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
    width: int,
    shown_step: int,
    chosen: int | None,
    kept_from: int | None,
) -> list[_Part]:
    """The "Timeline" section of the detail view: strip, legend, segments, preemptions."""
    parts: list[_Part] = ["\n", ("Timeline", "bold $primary")]
    parts += [" ", ("(, . choose a segment · enter shows its first step)", _MUTED), "\n"]
    if kept_from is not None:
        note = f"history starts at step {kept_from}: earlier steps are gone (--history)"
        parts += [(note, "$warning"), "\n"]
    if timeline is None or not timeline.segments:
        return [*parts, ("no step of this request in the history kept", _MUTED), "\n"]
    segments = timeline.segments
    picked = segments[chosen] if chosen is not None and chosen < len(segments) else None
    parts += _bar(timeline, width, shown_step, picked)
    parts += legend()
    for segment in segments:
        style = STATE_STYLES.get(segment.state, _MUTED)
        row_style = "reverse" if segment is picked else ""
        parts += [
            (_BLOCK, style),
            " ",
            (f"{segment.state:<9} {_steps(segment):<11}", f"bold {row_style}".strip()),
            " ",
            (f"{segment.start:.3f}-{segment.end:.3f}s", _MUTED),
            " ",
            (segment_text(segment, history, timeline.request_id), _PLAIN),
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


def segment_at(timeline: RequestTimeline | None, step: int) -> int | None:
    """The index of the segment holding ``step`` (else the last one before it)."""
    if timeline is None or not timeline.segments:
        return None
    found = 0
    for index, segment in enumerate(timeline.segments):
        if segment.first_step <= step:
            found = index
    return found
