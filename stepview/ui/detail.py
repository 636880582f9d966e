"""Everything about one request: prompt, parameters, timings, each sample as it streams,
and the logprobs vLLM returned.

The screen follows the request by id through the snapshots the app shows. Since an
unchanged request is the very same :class:`RequestView` object in the next snapshot, the
(possibly long) text is rebuilt only when the request actually moved.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

from stepview.model.sampling import form_values
from stepview.model.snapshot import (
    Completion,
    PositionLogprobs,
    RequestView,
    StepSnapshot,
    Timings,
)
from stepview.ui.format import (
    finish_reasons,
    latency,
    multi_line,
    one_line,
    rate,
    seconds,
    state_detail,
    token_repr,
)

_Part = str | tuple[str, str]
_HEADING = "bold $primary"
_MUTED = "$text-muted"
# Other candidates listed per position; vLLM may return up to 20, a line holds a few.
_ALTERNATIVES = 4


def _heading(title: str) -> list[_Part]:
    return ["\n", (title, _HEADING), "\n"]


def _clock(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"


def _timings(view: RequestView, now: float) -> list[_Part]:
    t: Timings = view.timings
    lat = latency(view, now)
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
        ("queued", seconds(lat.queued)),
        ("TTFT", seconds(lat.ttft)),
        ("decode", rate(lat.decode_rate)),
        ("total", seconds(lat.total)),
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


def _logprob_rows(
    positions: Iterable[PositionLogprobs | None], token_ids: Sequence[int]
) -> list[_Part]:
    """One line per position: the chosen token, its logprob and rank, then alternatives.

    vLLM puts the sampled (or prompt) token first, then the top candidates; the first
    prompt position has no logprobs at all.
    """
    parts: list[_Part] = [
        (f"{'pos':>5}  {'token':<16} {'logprob':>9} {'rank':>5}  others\n", _MUTED)
    ]
    for pos, entries in enumerate(positions):
        if not entries:
            token_id = token_ids[pos] if pos < len(token_ids) else -1
            token = f"<{token_id}>"
            parts.append((f"{pos:>5}  {token:<16} {'-':>9} {'-':>5}\n", _MUTED))
            continue
        chosen, *others = entries
        rank = "-" if chosen.rank is None else str(chosen.rank)
        token = one_line(token_repr(chosen.decoded, chosen.token_id), 40)
        parts.append(f"{pos:>5}  {token:<16} {chosen.logprob:>9.4f} {rank:>5}  ")
        alternatives = ", ".join(
            f"{one_line(token_repr(e.decoded, e.token_id), 20)} {e.logprob:.2f}"
            for e in others[:_ALTERNATIVES]
        )
        parts += [(alternatives, _MUTED), "\n"]
    return parts


def _completion(c: Completion, n: int) -> list[_Part]:
    title = f"Completion {c.index}" if n > 1 else "Completion"
    parts: list[_Part] = _heading(title)
    status = f"finished: {c.finish_reason}" if c.finish_reason else "streaming"
    if c.stop_reason is not None:
        status += f" (stop {one_line(str(c.stop_reason), 40)!s})"
    summary = f"{status} · {len(c.token_ids)} tokens"
    if c.cumulative_logprob is not None:
        summary += f" · cumulative logprob {c.cumulative_logprob:.3f}"
    parts += [(summary, _MUTED), "\n", multi_line(c.text) or ("(nothing yet)", _MUTED), "\n"]
    if c.logprobs is not None:
        parts += ["\n", ("logprobs", "bold"), "\n"]
        parts += _logprob_rows(c.logprobs, c.token_ids)
    return parts


def _scheduling(view: RequestView) -> list[_Part]:
    """Why it waits (while it does), and what it holds of the KV cache (when the engine says)."""
    parts: list[_Part] = []
    reason = view.wait_reason
    if reason is not None and not view.state.done:
        parts += [("waiting: ", "bold $warning"), (multi_line(reason.text), "$warning"), "\n"]
    if view.peak_kv_blocks or view.cached_prompt_tokens:
        parts += [
            ("KV blocks ", _MUTED),
            f"{view.kv_blocks} now, {view.peak_kv_blocks} at most",
            ("  prefix cache ", _MUTED),
            f"{view.cached_prompt_tokens} prompt tokens",
            "\n",
        ]
    return parts


def describe(view: RequestView, now: float) -> Content:
    """The whole detail text of ``view`` as of the snapshot clock ``now``."""
    parts: list[_Part] = [
        (one_line(view.request_id, 80), "bold $secondary"),
        "  ",
        (state_detail(view), "bold"),
    ]
    # Each gap stands between two styled runs: a run starting with spaces loses them in
    # librsvg-drawn screenshots ("decoding 12 tokprompt 8/8").
    if view.num_preemptions:
        parts += ["  ", (f"preempted {view.num_preemptions} times", "$warning")]
    if view.prompt_tokens:
        parts += [
            "  ",
            (f"prompt {view.computed_prompt_tokens}/{view.prompt_tokens} tokens", _MUTED),
        ]
    parts.append("\n")
    if view.error:
        parts += [("error ", "bold $error"), (multi_line(view.error), "$error"), "\n"]
    parts += _scheduling(view)
    parts += _heading("Timings (driver clock)") + _timings(view, now)
    parts += _heading("Sampling") + _sampling(view)
    parts += [*_heading("Prompt"), multi_line(view.prompt), "\n"]
    if view.prompt_logprobs is not None:
        parts += _heading("Prompt logprobs")
        parts += _logprob_rows(view.prompt_logprobs, view.prompt_token_ids)
    for completion in view.completions:
        parts += _completion(completion, view.spec.n)
    if view.state.done and len(view.completions) > 1:
        parts += ["\n", ("finish reasons ", _MUTED), finish_reasons(view) or "-", "\n"]
    return Content.assemble(*parts)


class DetailScreen(Screen[None]):
    """Full-screen detail of the request ``request_id``, kept current by the app."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("home,g", "scroll('home')", "Top", show=False),
        Binding("end,G", "scroll('end')", "Bottom", show=False),
    ]

    def __init__(self, request_id: str, snapshot: StepSnapshot) -> None:
        super().__init__()
        self.request_id = request_id
        self._snapshot = snapshot
        self._view: RequestView | None = None
        self._now = 0.0
        self._drawn = False
        self._where = ""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail-scroll"):
            yield Static(id="detail-body")
        yield Footer()

    def on_mount(self) -> None:
        scroll = self.query_one("#detail-scroll")
        scroll.border_title = f"Request {one_line(self.request_id, 40)}"
        scroll.border_subtitle = self._where
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

    def _render_request(self) -> None:
        snapshot = self._snapshot
        view = snapshot.find(self.request_id)
        now = snapshot.clock if view is not None and not view.state.done else self._now
        if self._drawn and view is self._view and now == self._now:
            return
        self._view, self._now, self._drawn = view, now, True
        body = self.query_one("#detail-body", Static)
        if view is None:
            body.update(
                Content.styled(f"Request {self.request_id} is not in this snapshot.", _MUTED)
            )
        else:
            body.update(describe(view, now))

    def action_scroll(self, where: str) -> None:
        scroll = self.query_one("#detail-scroll", VerticalScroll)
        if where == "home":
            scroll.scroll_home(animate=False)
        else:
            scroll.scroll_end(animate=False)
