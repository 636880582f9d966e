"""Text for the panes, the status bar and the detail view, as plain functions over snapshots.

Kept apart from the widgets so the wording of a state or a latency lives in one place, is
cheap to call from ``render_line`` (no Textual objects), and is tested without an app. The
latency figures themselves are :mod:`stepview.model.latency`'s, shared with the latency
panel, the results records and the CSV export; this module only words them.

Prompts are user input and model output is noise from random weights: either can hold
newlines, escape sequences, bidi overrides, zero-width joiners or unassigned code points.
Every string that reaches the terminal from a request goes through :func:`one_line` or
:func:`multi_line` first, so a prompt can never move the cursor, reorder a line or make a
row wider than Rich measured it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from stepview.model.latency import request_latency
from stepview.model.scheduling import WORDS, WaitReason
from stepview.model.snapshot import QUEUED, RecentStep, RequestState, RequestView

# -- making untrusted text safe to draw -----------------------------------------------------

NEWLINE_MARK = "⏎"
REPLACEMENT = "\ufffd"
# More combining marks than this on one base character is "zalgo" text: drawn, it smears
# over the rows above and below in most terminals.
_MAX_COMBINING = 2
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
_VARIATION_SELECTORS = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def _safe_char(ch: str, newline: str) -> str:
    """The replacement for one character that is not plainly printable."""
    if ch in _LINE_BREAKS:
        return newline
    if ch == "\t":
        return " "
    category = unicodedata.category(ch)
    if category == "Zs":
        # Odd spaces (no-break, em, ideographic) draw as spaces; keep their width.
        return ch
    if category == "Cf":
        # Format characters draw nothing but steer the terminal: bidi overrides and
        # isolates can reverse the rest of the line, joiners change how wide emoji are.
        return ""
    # Cc (other controls, ESC above all), Cs, Co, Cn.
    return REPLACEMENT


def _sanitize(text: str, newline: str) -> str:
    if text.isascii() and text.isprintable():
        return text  # the common case, at C speed
    out: list[str] = []
    combining = 0
    for ch in _VARIATION_SELECTORS.sub("", text.replace("\r\n", "\n")):
        if ch.isprintable():
            if unicodedata.combining(ch):
                combining += 1
                if combining > _MAX_COMBINING:
                    continue
            else:
                combining = 0
            out.append(ch)
        else:
            combining = 0
            out.append(_safe_char(ch, newline))
    return "".join(out)


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` made safe for one table cell: line breaks shown as ``⏎``.

    ``limit`` bounds the characters looked at (a row shows the start of a prompt only, and
    the prompt may be 100 kB).
    """
    if limit is not None and len(text) > limit:
        text = text[:limit]
    return _sanitize(text, NEWLINE_MARK)


def id_cell(request_id: str, width: int) -> str:
    """A request id for a column ``width`` wide: too long, its *end* is kept.

    Ids that share a start differ at the end (``load1-12``, ``load1-13``; ``a7db916a@1``
    keeps its rank): cut at the end like other cells, a whole load's rows read ``load1…``.
    """
    request_id = one_line(request_id, 64)
    if len(request_id) <= width or width < 2:
        return request_id
    return "…" + request_id[len(request_id) - width + 1 :]


def multi_line(text: str) -> str:
    """``text`` made safe for a wrapping block: real line breaks kept, nothing else raw."""
    return "\n".join(
        _sanitize(line, NEWLINE_MARK) for line in text.replace("\r\n", "\n").split("\n")
    )


def token_repr(decoded: str | None, token_id: int) -> str:
    """A token as the logprob tables show it: Python's repr, so spaces, newlines and
    invisible characters are visible and escaped (``'\\n'``, ``'\\u202e'``)."""
    if decoded is None:
        return f"<{token_id}>"
    return repr(decoded)


# -- numbers ----------------------------------------------------------------------------------


def seconds(value: float | None) -> str:
    """A duration short enough for a table cell: ``850ms``, ``1.23s``, ``2m05s``."""
    if value is None:
        return "-"
    if value < 0:
        value = 0.0
    if value < 1.0:
        return f"{value * 1000:.0f}ms"
    if value < 10.0:
        return f"{value:.2f}s"
    if value < 60.0:
        return f"{value:.1f}s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def rate(value: float | None) -> str:
    """Tokens per second: ``45.2 tok/s``, ``1.3k tok/s``."""
    return f"{rate_value(value)} tok/s"


def rate_value(value: float | None) -> str:
    """The number of :func:`rate` alone (``45.2``, ``1.3k``, ``-``), at most 4 characters up
    to 999k tok/s, for the status bar where the unit is the label."""
    if value is None:
        return "-"
    # Each bound is where the next form's rounding would carry into one more digit:
    # 99.97 is "100", not "100.0"; 999.7 is "1.0k", not "1000"; 9_970 is "10k", not "10.0k".
    if value >= 9_950:
        return f"{value / 1000:.0f}k"
    if value >= 999.5:
        return f"{value / 1000:.1f}k"
    if value >= 99.95:
        return f"{value:.0f}"
    return f"{value:.1f}"


def percent(value: float) -> str:
    return f"{value * 100:.0f}%"


# -- one request --------------------------------------------------------------------------------


def finish_reasons(view: RequestView) -> str:
    """``stop``, ``length`` or ``length,stop`` for n > 1 samples that ended differently."""
    reasons = sorted({c.finish_reason for c in view.completions if c.finish_reason})
    return ",".join(reasons)


def state_detail(view: RequestView) -> str:
    """What a request is doing, in a few words: ``prefill 32/128``, ``decoding 12 tok``."""
    state = view.state
    if state is RequestState.PREEMPTED:
        return f"preempted x{view.num_preemptions}" if view.num_preemptions > 1 else "preempted"
    if state is RequestState.PREFILLING:
        return f"prefill {view.computed_prompt_tokens}/{view.prompt_tokens}"
    if state is RequestState.DECODING:
        return f"decoding {view.output_tokens} tok"
    if state is RequestState.FINISHED:
        return finish_reasons(view) or "finished"
    return state.value


def latency_cell(view: RequestView, now: float) -> str:
    """The latency column: what matters for the request's pane, as of the snapshot clock
    ``now`` (queue time and decode rate grow or move while the request is in flight).

    The figures are :func:`~stepview.model.latency.request_latency`'s, the ones the latency
    panel counts: a request's ``tok/s`` here is its ``decode tok/s`` there.
    """
    if view.state is RequestState.REJECTED:
        return ""
    lat = request_latency(view, now)
    if lat.ttft is None:
        return f"queued {seconds(lat.queue)}" if lat.queue is not None else ""
    if lat.decode_rate is None:
        return f"ttft {seconds(lat.ttft)}"
    return f"ttft {seconds(lat.ttft)} {rate(lat.decode_rate)}"


# -- the engine over recent steps ----------------------------------------------------------------

SPARK_CHARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int, top: float | None = None) -> str:
    """The last ``width`` values as block characters, scaled to ``top`` (default: their max)."""
    if width <= 0:
        return ""
    values = values[-width:]
    peak = top if top is not None else max(values, default=0.0)
    if peak <= 0:
        return SPARK_CHARS[0] * len(values)
    last = len(SPARK_CHARS) - 1
    return "".join(SPARK_CHARS[max(0, min(last, round(v / peak * last)))] for v in values)


IDLE_GAP_S = 1.0
"""Seconds between two steps that end a busy window (see :func:`busy_window`)."""


def step_throughputs(recent: Sequence[RecentStep]) -> list[float]:
    """Generated tokens per second for each recent step, over the time since the step before.

    Dividing by the wall time between steps (not the step's own duration) shows what users
    get, idle gaps included; the first step, with no predecessor, uses its own duration.
    """
    out: list[float] = []
    previous: RecentStep | None = None
    for stat in recent:
        interval = stat.clock - previous.clock if previous is not None else stat.step_time
        if interval <= 0:
            interval = stat.step_time
        out.append(stat.generation_tokens / interval if interval > 0 else 0.0)
        previous = stat
    return out


def busy_window(recent: Sequence[RecentStep]) -> Sequence[RecentStep]:
    """The last run of ``recent`` steps taken one after another, with no idle gap between.

    A busy engine steps back to back (milliseconds apart); more than :data:`IDLE_GAP_S`
    between one step's end and the next step's start means it had nothing to do, or was
    paused. An average over such a gap says nothing about the engine ("1.4 tok/s" after
    a few bursts): the figures stop at it.
    """
    start = len(recent) - 1
    while start > 0:
        current, before = recent[start], recent[start - 1]
        if current.clock - current.step_time - before.clock > IDLE_GAP_S:
            break
        start -= 1
    return recent[max(0, start) :]


def throughput(recent: Sequence[RecentStep]) -> float | None:
    """Tokens per second over the last busy window of ``recent`` (:func:`busy_window`);
    ``None`` ("-") before it holds two steps."""
    window = busy_window(recent)
    if len(window) < 2:
        return None
    span = window[-1].clock - window[0].clock
    if span <= 0:
        return None
    return sum(s.generation_tokens for s in window[1:]) / span


# The wait reason in a word (the table's, model.scheduling), after the state of a request in
# the engine's queue: ``waiting·kv``. A pending one says no more than ``pending``.
_REASON_WORDS = WORDS
_WAITS = QUEUED


def state_cell(
    view: RequestView, width: int | None = None, reason: WaitReason | None = None
) -> str:
    """The state column: the state, and for a request that waits why (``reason``: the
    snapshot's :meth:`~stepview.model.snapshot.StepSnapshot.reason_of` it, or by default its
    own; the detail says more).

    The reason comes first: within ``width`` the cell drops the request it waits behind
    (``waiting·behind``), then the preemption count (``preempted·kv``), rather than have the
    table cut the reason itself off (``waiting·behind l…``).
    """
    detail = state_detail(view)
    if reason is None:
        reason = view.wait_reason
    word = None if reason is None or view.state not in _WAITS else _REASON_WORDS.get(reason.code)
    if reason is None or word is None:
        return detail
    shortest = f"{view.state.value}·{word}"
    candidates = [f"{detail}·{word}", shortest]
    if reason.blocker:
        candidates.insert(0, f"{detail}·{word} {one_line(reason.blocker)}")
    return next((c for c in candidates if width is None or len(c) <= width), shortest)


def aligned(
    text: str, width: int, style: str, *, left: bool = False
) -> list[str | tuple[str, str]]:
    """``text`` padded to ``width`` cells, the padding a plain run of its own.

    A styled run that starts with spaces loses them in librsvg-drawn screenshots (see
    ``status_bar.py``), so right-aligned figures put their padding in a separate run.
    """
    pad = " " * max(0, width - len(text))
    return [(text, style), pad] if left else [pad, (text, style)]
