"""The step view (``v``): what the scheduler did in the step on screen, and why others waited.

It answers "what did this step spend its budget on?": the token budget as a bar (prefill,
decode, unused of ``max_num_batched_tokens``), the requests scheduled with their tokens, who
was preempted, admitted (scheduled for the first time) or finished in this step, the KV cache,
and every waiting request with the scheduler's reason.

"In this step" is a difference: the step's snapshot against the one before it, looked up in
the history the app keeps (a live run's, or the replay's trace). The screen follows the app's
history keys: ``[``/``]`` change the step shown here as on the main screen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, Final

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Static

from stepview.model.recent import since, total_of
from stepview.model.scheduling import StepBudget
from stepview.model.snapshot import RequestState, RequestView, StepSnapshot
from stepview.ui.display import aligned, one_line, percent, seconds
from stepview.ui.footer import FittingFooter

_Part = str | tuple[str, str]
_MUTED: Final = "$text-muted"
_HEADING: Final = "bold $primary"
PREFILL_STYLE: Final = "$primary"
DECODE_STYLE: Final = "$success"
_WAITING_STATES: Final = frozenset(
    {RequestState.PENDING, RequestState.WAITING, RequestState.PREEMPTED}
)
_ID_WIDTH: Final = 14


def previous_of(history: Sequence[StepSnapshot], snapshot: StepSnapshot) -> StepSnapshot | None:
    """The last kept snapshot of an earlier step than ``snapshot``'s (None: not kept)."""
    for index in range(len(history) - 1, -1, -1):
        if history[index].step < snapshot.step:
            return history[index]
    return None


def budget_bar(budget: StepBudget, width: int) -> list[_Part]:
    """``max_num_batched_tokens`` as ``width`` cells: prefill, decode, then unused."""
    total = max(1, budget.max_tokens)
    prefill = round(width * min(budget.prefill_tokens, total) / total)
    decode = min(width - prefill, round(width * budget.decode_tokens / total))
    if budget.decode_tokens and not decode and prefill < width:
        decode = 1  # a decode batch of a few tokens still shows
    return [
        ("█" * prefill, PREFILL_STYLE),
        ("█" * decode, DECODE_STYLE),
        ("░" * (width - prefill - decode), _MUTED),
    ]


def _heading(title: str, count: int | None = None) -> list[_Part]:
    tail = "" if count is None else f" ({count})"
    return ["\n", (title + tail, _HEADING), "\n"]


def _id(view: RequestView) -> tuple[str, str]:
    return (one_line(view.request_id, 40).ljust(_ID_WIDTH), "bold $secondary")


def _ids(views: Sequence[RequestView]) -> list[_Part]:
    if not views:
        return [("none", _MUTED), "\n"]
    return [", ".join(one_line(v.request_id, 40) for v in views), "\n"]


def _scheduled_row(view: RequestView, before: RequestView | None, admitted: bool) -> list[_Part]:
    work = "prefill" if view.state is RequestState.PREFILLING else view.state.value
    if before is not None and view.computed_prompt_tokens > before.computed_prompt_tokens:
        work = f"prefill {view.computed_prompt_tokens}/{view.prompt_tokens}"
    parts: list[_Part] = [
        "  ",
        _id(view),
        *aligned(f"{view.scheduled_tokens} tok", 8, "bold"),
        "  ",
        (work, _MUTED),
    ]
    if admitted:
        parts += ["  ", ("admitted", "$accent")]
    return [*parts, "\n"]


def _admitted(before: RequestView | None) -> bool:
    """Scheduled for the first time in this step (unknown to, or unscheduled in, the one before)."""
    return before is None or before.timings.scheduled is None


def describe_step(
    snapshot: StepSnapshot, previous: StepSnapshot | None, width: int = 60
) -> Content:
    """The step view's text for ``snapshot``, given the snapshot of the step before it."""
    parts: list[_Part] = [
        (f"Step {snapshot.step}", "bold"),
        " ",
        (f"at {snapshot.clock:.3f}s, took {seconds(snapshot.step_time)}", _MUTED),
        "\n",
    ]
    if previous is None:
        parts += [("the step before is not kept: admitted and finished not known", _MUTED), "\n"]
    before = {v.request_id: v for v in previous.requests()} if previous is not None else {}
    budget = snapshot.budget
    parts += _heading("Token budget")
    if budget is None:
        parts += [("not recorded for this step", _MUTED), "\n"]
    else:
        used = budget.prefill_tokens + budget.decode_tokens
        parts += [*budget_bar(budget, width), " ", (f"{used}/{budget.max_tokens}", "bold"), "\n"]
        for mark, style, name, tokens in (
            ("█", PREFILL_STYLE, "prefill", budget.prefill_tokens),
            ("█", DECODE_STYLE, "decode", budget.decode_tokens),
            ("░", _MUTED, "unused", budget.unused_tokens),
        ):
            parts += [(mark, style), " ", (name, _MUTED), " ", (str(tokens), "bold"), "  "]
        parts.append("\n")
    kv: list[_Part] = [("KV cache ", _MUTED), (percent(snapshot.counters.kv_cache_usage), "bold")]
    if budget is not None:
        kv += ["  ", (f"{budget.free_blocks} of {budget.total_blocks} blocks free", _MUTED)]
    parts += [*kv, "\n"]
    finished = (
        list(since(snapshot.finished, total_of(previous.finished))) if previous is not None else []
    )
    scheduled = [v for v in (*snapshot.active, *finished) if v.scheduled_tokens]
    admitted = [
        v for v in scheduled if previous is not None and _admitted(before.get(v.request_id))
    ]
    parts += _heading("Scheduled", len(scheduled))
    for view in scheduled:
        parts += _scheduled_row(view, before.get(view.request_id), view in admitted)
    if not scheduled:
        parts += [("nothing", _MUTED), "\n"]
    preempted = [
        v
        for v in snapshot.active
        if (b := before.get(v.request_id)) is not None and v.num_preemptions > b.num_preemptions
    ]
    for title, views in (
        ("Preempted", preempted),
        ("Admitted", admitted),
        ("Finished", finished),
    ):
        parts += [(f"{title:<10}", _HEADING), *_ids(views)]
    waiting = [v for v in snapshot.active if v.state in _WAITING_STATES]
    parts += _heading("Waiting", len(waiting))
    for view in waiting:
        own = snapshot.reason_of(view)
        reason = own.text if own is not None else view.state.value
        parts += ["  ", _id(view), (one_line(reason, 120), "$warning"), "\n"]
    if not waiting:
        parts += [("nobody", _MUTED), "\n"]
    return Content.assemble(*parts)


class StepScreen(Screen[None]):
    """The step on screen, in full; kept current by the app like the detail view."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,v", "app.pop_screen", "Back"),
    ]

    def __init__(
        self, snapshot: StepSnapshot, history: Callable[[], Sequence[StepSnapshot]]
    ) -> None:
        super().__init__()
        self._snapshot = snapshot
        self._history = history
        self._where = ""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="step-scroll"):
            yield Static(id="step-body")
        yield FittingFooter()

    def on_mount(self) -> None:
        scroll = self.query_one("#step-scroll")
        scroll.border_title = "Step view"
        scroll.border_subtitle = self._where or "[ ] other steps · esc back"
        self._render_step()

    def show_snapshot(self, snapshot: StepSnapshot) -> None:
        if snapshot is not self._snapshot:
            self._snapshot = snapshot
            if self.is_mounted:
                self._render_step()

    def show_where(self, text: str) -> None:
        """Mark a past step (history or replay), as the detail view does."""
        if text != self._where:
            self._where = text
            if self.is_mounted:
                self.query_one("#step-scroll").border_subtitle = text or "[ ] other steps"

    def _render_step(self) -> None:
        snapshot = self._snapshot
        previous = previous_of(self._history(), snapshot)
        width = max(10, min(64, self.app.size.width - 16))
        self.query_one("#step-body", Static).update(describe_step(snapshot, previous, width))
