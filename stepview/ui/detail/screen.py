"""Everything about one request: prompt, parameters, timings, each sample as it streams,
and the logprobs vLLM returned, as a heat-map (:mod:`stepview.ui.detail.heatmap`).

The screen follows the request by id through the snapshots the app shows. Since an
unchanged request is the very same :class:`RequestView` object in the next snapshot, the
(possibly long) text is rebuilt only when the request actually moved, or the token cursor did.

Under the header, the request's life as a strip over steps (:mod:`stepview.ui.detail.strip`):
``,``/``.`` choose a row (a waiting stretch, or a segment), ``e`` expands a stretch into its
segments or collapses it, and Enter moves the app's history to the row's first step.

A cursor (← →) stops on every token; the panel at the bottom shows its probability and top
candidates. ``f`` forks the request at the cursor: the add form, prefilled with the prompt
plus the sample up to and including that token (``c``, the app's key, clones it whole).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.geometry import Region
from textual.screen import Screen
from textual.widgets import Static

from stepview.model.latency import request_latency
from stepview.model.sampling import form_values
from stepview.model.scheduling import WaitReason
from stepview.model.snapshot import Completion, RequestState, RequestView, StepSnapshot, Timings
from stepview.ui.detail.heatmap import (
    CURSOR,
    Spot,
    heat_parts,
    prompt_texts,
    spots,
    token_panel,
)
from stepview.ui.detail.strip import Row, StepChosen, StripTracker, row_at, rows_of, strip_parts
from stepview.ui.display import (
    finish_reasons,
    multi_line,
    one_line,
    rate,
    seconds,
    state_detail,
)
from stepview.ui.drafts import AskToAdd, fork_of, token_texts
from stepview.ui.footer import FittingFooter
from stepview.ui.plain import literal

_Part = str | tuple[str, str]
_HEADING = "bold $primary"
_MUTED = "$text-muted"


def _heading(title: str) -> list[_Part]:
    return ["\n", (title, _HEADING), "\n"]


def _clock(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"


def _timings(view: RequestView, now: float) -> list[_Part]:
    t: Timings = view.timings
    lat = request_latency(view, now)  # the pane's and the latency panel's figures
    parts: list[_Part] = []
    for name, value in (
        ("arrival", t.arrival),
        ("scheduled", t.scheduled),
        ("first token", t.first_token),
        ("finished", t.finished),
    ):
        parts += [(f"{name} ", _MUTED), _clock(value), "  "]
    parts.append("\n")
    for name, text in (
        ("queued", seconds(lat.queue)),
        ("TTFT", seconds(lat.ttft)),
        ("decode", rate(lat.decode_rate)),
        ("total", seconds(lat.e2e)),
    ):
        parts += [(f"{name} ", _MUTED), text, "  "]
    parts.append("\n")
    return parts


def _sampling(view: RequestView) -> list[_Part]:
    parts: list[_Part] = []
    for name, value in form_values(view.spec).items():
        shown = one_line(value.replace("\n", " | "), 60) if value else "-"
        parts += [(f"{name} ", _MUTED), shown, "  "]
    parts.append("\n")
    return parts


def _completion(c: Completion, n: int, cursor: Spot | None) -> list[_Part]:
    title = f"Completion {c.index}" if n > 1 else "Completion"
    parts: list[_Part] = _heading(title)
    status = f"finished: {c.finish_reason}" if c.finish_reason else "streaming"
    if c.stop_reason is not None:
        status += f" (stop {one_line(str(c.stop_reason), 40)!s})"
    summary = f"{status} · {len(c.token_ids)} tokens"
    if c.cumulative_logprob is not None:
        summary += f" · cumulative logprob {c.cumulative_logprob:.3f}"
    parts += [(summary, _MUTED), "\n"]
    texts = token_texts(c)
    if not c.token_ids:
        parts.append(("(nothing yet)", _MUTED))
    elif texts is None:  # no text per token: the whole text, without cursor or colours
        parts.append(multi_line(c.text))
    else:
        parts += heat_parts(texts, c.logprobs, sample=c.index, cursor=cursor)
    parts.append("\n")
    return parts


def _scheduling(view: RequestView, reason: WaitReason | None) -> list[_Part]:
    """Why it waits (while it does), and what it holds of the KV cache (when the engine says)."""
    parts: list[_Part] = []
    if reason is not None and not view.state.done:
        parts += [("waiting: ", "bold $warning"), (multi_line(reason.text), "$warning"), "\n"]
    if view.peak_kv_blocks or view.cached_prompt_tokens:
        parts += [
            ("KV blocks ", _MUTED),
            f"{view.kv_blocks} now, {view.peak_kv_blocks} at most",
            "  ",
            ("prefix cache ", _MUTED),
            f"{view.cached_prompt_tokens} prompt tokens",
            "\n",
        ]
    return parts


def describe(
    view: RequestView,
    now: float,
    cursor: Spot | None = None,
    strip: Sequence[_Part] = (),
    reason: WaitReason | None = None,
) -> Content:
    """The whole detail text of ``view`` as of the snapshot clock ``now``, with the token
    cursor on ``cursor`` and the timeline ``strip``
    (:func:`~stepview.ui.detail.strip.strip_parts`); ``reason`` is why it waits (the
    snapshot's :meth:`~stepview.model.snapshot.StepSnapshot.reason_of`; by default its own)."""
    parts: list[_Part] = [(one_line(view.request_id, 80), "bold $secondary"), "  "]
    if view.lineage is not None:
        parts += [(one_line(view.lineage.label(), 80), "italic"), "  "]
    parts.append((state_detail(view), "bold"))
    # Each gap stands between two styled runs: a run starting with spaces loses them in
    # librsvg-drawn screenshots ("decoding 12 tokprompt 8/8").
    if view.num_preemptions and view.state is not RequestState.PREEMPTED:  # else said above
        parts += ["  ", (f"preempted x{view.num_preemptions}", "$warning")]
    if view.prompt_tokens:
        parts += [
            "  ",
            (f"prompt {view.computed_prompt_tokens}/{view.prompt_tokens} tokens", _MUTED),
        ]
    parts.append("\n")
    if view.error:
        parts += [("error ", "bold $error"), (multi_line(view.error), "$error"), "\n"]
    parts += _scheduling(view, view.wait_reason if reason is None else reason)
    parts += strip
    # What was asked and answered first (the heat-map in view at 80x24), then the figures.
    parts += [*_heading("Prompt"), multi_line(view.prompt), "\n"]
    for completion in view.completions:
        parts += _completion(completion, view.spec.n, cursor)
    if view.state.done and len(view.completions) > 1:
        parts += ["\n", ("finish reasons ", _MUTED), finish_reasons(view) or "-", "\n"]
    if view.prompt_logprobs is not None:
        parts += _heading("Prompt logprobs")
        parts += heat_parts(prompt_texts(view), view.prompt_logprobs, sample=None, cursor=cursor)
        parts.append("\n")
    parts += _heading("Timings (driver clock)") + _timings(view, now)
    parts += _heading("Sampling") + _sampling(view)
    return Content.assemble(*parts)


class DetailScreen(Screen[None]):
    """Full-screen detail of the request ``request_id``, kept current by the app."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("home,g", "scroll('home')", "Top", show=False),
        Binding("end,G", "scroll('end')", "Bottom", show=False),
        # Priority: the focused scroll area would take the arrows for horizontal scrolling.
        Binding("left,h", "token(-1)", "Previous token", show=False, priority=True),
        Binding("right,l", "token(1)", "Next token", show=False, priority=True),
        Binding("shift+left", "token(-10)", "10 tokens back", show=False, priority=True),
        Binding("shift+right", "token(10)", "10 tokens on", show=False, priority=True),
        Binding("f", "fork", "Fork", tooltip="Fork at the cursor: prompt + sample up to it"),
        Binding(
            "comma",
            "segment(-1)",
            "Prev segment",
            key_display=",",
            show=False,
            tooltip="Timeline strip: choose the previous segment",
        ),
        Binding(
            "full_stop",
            "segment(1)",
            "Next segment",
            key_display=".",
            show=False,
            tooltip="Timeline strip: choose the next segment",
        ),
        Binding(
            "e",
            "expand",
            "Expand",
            show=False,
            tooltip="Timeline strip: expand the chosen waiting stretch into its segments, "
            "or collapse it",
        ),
        Binding(
            "enter",
            "show_segment",
            "Show step",
            show=False,
            tooltip="Move the history to the chosen segment's first step",
        ),
    ]

    def __init__(
        self,
        request_id: str,
        snapshot: StepSnapshot,
        history: Callable[[], Sequence[StepSnapshot]] | None = None,
    ) -> None:
        """``history``: the snapshots the app keeps (the replay's trace), for the strip."""
        super().__init__()
        self.request_id = request_id
        self._snapshot = snapshot
        self._history = history or (lambda: (self._snapshot,))
        self._strip = StripTracker(request_id)
        self.chosen: int | None = None
        """The row chosen with ``,``/``.``; ``None``: the one holding the shown step."""
        self.expanded: set[int] = set()
        """The stretches expanded with ``e`` (:attr:`~stepview.ui.detail.strip.Row.key`)."""
        self._step = -1
        self._view: RequestView | None = None
        self._now = 0.0
        self._drawn = False
        self._where = ""
        self.cursor: Spot | None = None
        """The token under the cursor; ``None`` until the request has one."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail-scroll"):
            yield Static(id="detail-body")
        yield Static(id="detail-token")
        yield FittingFooter()

    def on_mount(self) -> None:
        scroll = self.query_one("#detail-scroll")
        scroll.border_title = literal(f"Request {self.request_id[:40]}")
        scroll.border_subtitle = self._where
        panel = self.query_one("#detail-token")
        panel.border_title = "Token under the cursor"
        panel.border_subtitle = "← → move · f fork here · c clone"
        self._render_request()

    @property
    def view(self) -> RequestView | None:
        """The request as last shown (``None`` if it was not in the snapshot)."""
        return self._view

    def show_snapshot(self, snapshot: StepSnapshot) -> None:
        """Follow the request into ``snapshot``; redraw only if it changed."""
        self._snapshot = snapshot
        if self.is_mounted:
            self._render_request()

    def show_where(self, text: str) -> None:
        """Say which step this is when it is not the live one (this screen has no status bar):
        ``HISTORY step 120 of 340 · L live``, or the replay position; ``""`` when live."""
        if text != self._where:
            self._where = text
            if self.is_mounted:
                self.query_one("#detail-scroll").border_subtitle = text

    def _render_request(self, *, force: bool = False) -> None:
        snapshot = self._snapshot
        view = snapshot.find(self.request_id)
        now = snapshot.clock if view is not None and not view.state.done else self._now
        # The strip marks the shown step; a finished request's strip no longer moves, so a
        # live engine's steps do not redraw it (its long heat-map) at every poll.
        done = view is not None and view is self._view and view.state.done
        same_step = snapshot.step == self._step or done
        if self._drawn and view is self._view and now == self._now and same_step and not force:
            return
        self._view, self._now, self._drawn, self._step = view, now, True, snapshot.step
        body = self.query_one("#detail-body", Static)
        if view is None:
            body.update(
                Content.styled(
                    f"Request {one_line(self.request_id)} is not in this snapshot.", _MUTED
                )
            )
        else:
            if self.cursor is None:
                self._place_cursor(view)
            reason = snapshot.reason_of(view)
            body.update(describe(view, now, self.cursor, self._strip_parts(), reason))
        self.query_one("#detail-token", Static).update(token_panel(view, self.cursor))

    def _strip_parts(self) -> list[str | tuple[str, str]]:
        history = self._history()
        timeline = self._strip.update(history)
        rows = rows_of(timeline, self.expanded)
        chosen = self.chosen if self.chosen is not None else row_at(rows, self._step)
        return strip_parts(
            timeline,
            history,
            rows=rows,
            width=min(120, self.app.size.width - 4),
            shown_step=self._step,
            chosen=chosen,
            kept_from=self._strip.kept_from,
        )

    def _rows(self) -> tuple[list[Row], int | None]:
        """The timeline's rows, and the chosen one's index (``None``: no rows)."""
        rows = rows_of(self._strip.update(self._history()), self.expanded)
        if not rows:
            return rows, None
        at = self.chosen if self.chosen is not None else row_at(rows, self._step) or 0
        return rows, min(at, len(rows) - 1)

    def action_segment(self, delta: int) -> None:
        """Choose the row ``delta`` away from the chosen one (at first: the shown step's)."""
        rows, at = self._rows()
        if at is None:
            return
        self.chosen = max(0, min(len(rows) - 1, at + delta))
        self._render_request(force=True)

    def action_expand(self) -> None:
        """``e``: the chosen stretch of several segments shows them, its first one chosen; on
        an expanded stretch or one of its segments, it collapses again, the stretch chosen."""
        rows, at = self._rows()
        if at is None:
            return
        row = rows[at]
        if row.open or row.inner:
            self.expanded.discard(row.key)
            self.chosen = next(i for i, r in enumerate(rows) if r.key == row.key)
        elif row.parts > 1:
            self.expanded.add(row.key)
            self.chosen = at + 1
        else:
            return
        self._render_request(force=True)

    def action_show_segment(self) -> None:
        """Enter: the app shows the chosen row's first step (history, or the replay)."""
        rows, at = self._rows()
        if at is not None:
            self.post_message(StepChosen(rows[at].stretch.first_step))

    def _place_cursor(self, view: RequestView) -> None:
        """First stop: the first generated token (forks start there), else any token."""
        stops = spots(view)
        self.cursor = next((s for s in stops if s[0] is not None), stops[0] if stops else None)
        if self.cursor is not None:
            self.refresh_bindings()  # Fork has a token to fork at now

    # -- the token cursor, and forking at it ---------------------------------------------------

    def action_token(self, delta: int) -> None:
        """Move the cursor ``delta`` tokens, across the prompt's and every sample's tokens."""
        view = self._view
        stops = spots(view) if view is not None else []
        if not stops:
            return
        at = stops.index(self.cursor) if self.cursor in stops else 0
        self.cursor = stops[max(0, min(len(stops) - 1, at + delta))]
        self._render_request(force=True)
        self.refresh_bindings()
        self.call_after_refresh(self._show_cursor)

    def _show_cursor(self) -> None:
        """Scroll the token under the cursor into view: below a long prompt and timeline the
        completion starts off screen, and arrowing through it must not happen blind."""
        body = self.query_one("#detail-body", Static)
        width = body.content_region.width
        if width <= 0:
            return
        content = body.render()
        if not isinstance(content, Content):
            return
        for line, text in enumerate(content.wrap(width)):
            if any(span.style == CURSOR for span in text.spans):
                scroll = self.query_one("#detail-scroll")
                scroll.scroll_to_region(Region(0, line, width, 1), animate=False, center=True)
                return

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Fork follows the app's rules (hidden in a replay, dimmed without an engine), and is
        dimmed while the cursor is not on a generated token."""
        if action != "fork":
            return True
        allowed = self.app.check_action(action, parameters)
        if not allowed:
            return allowed
        return True if self._fork() is not None else None

    def _fork(self) -> AskToAdd | None:
        view, cursor = self._view, self.cursor
        if view is None or cursor is None or cursor[0] is None:
            return None
        draft = fork_of(view, cursor[0], cursor[1])
        return None if draft is None else AskToAdd(draft)

    def action_fork(self) -> None:
        ask = self._fork()
        if ask is None:
            self.notify("Move the cursor (← →) onto a generated token to fork there.")
        else:
            self.post_message(ask)

    def action_scroll(self, where: str) -> None:
        scroll = self.query_one("#detail-scroll", VerticalScroll)
        if where == "home":
            scroll.scroll_home(animate=False)
        else:
            scroll.scroll_end(animate=False)
