"""The engine cores' thread stacks a flight recording holds (``K``, in a replay).

A recording written while an engine core hung carries what each of the core's threads was
doing then (:mod:`stepview.model.stacks`), or why there are none (a core stopped with
``kill -STOP`` cannot answer). This screen lists each take, the thread that runs the core's
steps first with the frame it is in marked (where a hung step hangs), then the other threads;
the raw text stays in the file for tools. Read-only, about the recording rather than the step
on screen, so it does not follow the history keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar, Final

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Static

from stepview.model.stacks import NONE, CoreStacks, RecordedStacks, ThreadStack
from stepview.ui.footer import FittingFooter

_MUTED: Final = "$text-muted"
_Part = str | tuple[str, str]


def _when(taken: float) -> str:
    if not taken:
        return "at an unknown time"
    return datetime.fromtimestamp(taken, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ordered(core: CoreStacks, threads: Sequence[ThreadStack]) -> list[ThreadStack]:
    """The thread that runs the core's steps first, then the others as written."""
    first = [t for t in threads if core.step_thread and t.thread_id == core.step_thread]
    return first + [t for t in threads if t not in first]


def core_lines(core: CoreStacks) -> list[_Part]:
    """One core's take: who, when, how; then every thread, most recent frame first."""
    how = "no stacks" if core.how == NONE else core.how
    parts: list[_Part] = [(core.core, "bold"), "  ", (f"{how}, {_when(core.taken)}", _MUTED)]
    parts.append("\n")
    if core.note:
        parts += [(f"  {core.note}", _MUTED), "\n"]
    if core.why_none is not None:
        parts += [("  No stacks: ", "bold $warning"), core.why_none, "\n"]
    dump = core.dump()
    if dump.timeout:
        parts += [(f"  faulthandler's watchdog fired after {dump.timeout}", _MUTED), "\n"]
    for thread in _ordered(core, dump.threads):
        stepping = bool(core.step_thread) and thread.thread_id == core.step_thread
        label = core.thread_label(thread)
        parts += [("▶ " if stepping else "  ", "bold $accent"), (label, "bold $primary"), "\n"]
        if not thread.frames:
            parts += [("      <no Python frame>", _MUTED), "\n"]
        for index, frame in enumerate(thread.frames):
            if index == 0:
                parts += [("    → ", "bold $accent"), (frame.where, "bold"), "\n"]
                parts += [(f"      {frame.file}", _MUTED), "\n"]
            else:
                parts += [f"      {frame.where}", "\n"]
        if thread.truncated:
            parts += [("      … (faulthandler lists 100 frames at most)", _MUTED), "\n"]
    if dump.more_threads:
        parts += [("  … (faulthandler lists 100 threads at most)", _MUTED), "\n"]
    for line in dump.other:
        parts += [(f"  {line}", _MUTED), "\n"]
    return parts


def stacks_text(takes: Sequence[RecordedStacks]) -> Content:
    """Every take of a recording, in the order they were written."""
    parts: list[_Part] = []
    if not takes:
        parts.append(("This recording holds no engine core stacks.", _MUTED))
    for take in takes:
        title = f"─ taken for {take.kind} at step {take.step} "
        parts += [(f"{title:─<76}", "bold $primary"), "\n"]
        for core in take.cores:
            parts += core_lines(core)
            parts.append("\n")
    return Content.assemble(*parts)


class StacksScreen(Screen[None]):
    """The engine cores' stacks in the replayed flight recording."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,K", "app.pop_screen", "Back")]

    def __init__(self, takes: Sequence[RecordedStacks]) -> None:
        super().__init__()
        self._takes = list(takes)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="stacks-scroll"):
            yield Static(stacks_text(self._takes), id="stacks-text")
        yield FittingFooter()

    def on_mount(self) -> None:
        box = self.query_one("#stacks-scroll")
        box.border_title = "Engine core stacks"
        box.border_subtitle = "esc back"
