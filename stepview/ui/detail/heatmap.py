"""Logprobs as a heat-map: every token coloured by the probability of the token chosen there.

A token's probability is ``exp(logprob)`` of its first logprob entry (vLLM puts the sampled,
or for prompt logprobs the actual, token first). Five bands, from calm to hot; the two lowest
are also underlined (and the lowest bold), so the picture still reads with ``NO_COLOR`` or on
a monochrome terminal. The colours are ANSI names: they follow the terminal's own palette, like
the rest of the app's ``ansi-dark`` theme, and look the same in 16, 256 or true colours.
Tokens without logprobs are drawn plain.

A *spot* names one token: ``(sample index, position)``, or ``(None, position)`` for a prompt
token. The detail view keeps a cursor on one spot; :func:`token_panel` describes it with its
top-k alternatives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from textual.content import Content

from stepview.model.snapshot import LogprobEntry, PositionLogprobs, RequestView
from stepview.ui.display import NEWLINE_MARK, one_line, token_repr
from stepview.ui.drafts import token_texts

Run = str | tuple[str, str]
"""Text, or text and its style: what :meth:`Content.assemble` takes."""
Part = Run | Content
Spot = tuple[int | None, int]
"""A token: (sample index, position in it), or (None, position) for a prompt token."""

CURSOR = "bold reverse ansi_bright_white on ansi_blue"
"""Blue is no band's colour; reversed, it stays an inverse block without colour too."""
_MUTED = "$text-muted"
TOP_K = 5
"""Rows of candidates in the token panel (vLLM may return 20; the panel fits 80x24)."""


class Band(NamedTuple):
    """Probabilities from ``floor`` up to the next band's floor, drawn in ``style``."""

    floor: float
    label: str
    style: str


BANDS = (
    Band(0.9, "≥90%", "ansi_green"),
    Band(0.5, "50-90%", "ansi_yellow"),
    Band(0.2, "20-50%", "ansi_black on ansi_yellow"),
    Band(0.05, "5-20%", "underline ansi_bright_white on ansi_red"),
    Band(0.0, "<5%", "bold underline ansi_bright_white on ansi_magenta"),
)


def probability(entry: LogprobEntry) -> float:
    """``exp(logprob)``; vLLM reports ``-inf`` for a token it could never have chosen."""
    return math.exp(entry.logprob) if entry.logprob > -math.inf else 0.0


def band_of(prob: float) -> Band:
    """The band a probability falls in (NaN, never expected, counts as the lowest)."""
    return next((band for band in BANDS if prob >= band.floor), BANDS[-1])


def legend() -> Content:
    """One line naming every band in its own style, and what plain text means."""
    parts: list[Part] = [("p(token) ", _MUTED)]
    for band in BANDS:
        parts += [(band.label, band.style), " "]
    parts += [("plain", "$text"), " ", ("no logprobs", _MUTED)]
    return Content.assemble(*parts)


def shown_token(text: str) -> str:
    """A token as it stands in running text: line breaks kept but marked, empty ones visible."""
    if not text:
        return "∅"
    lines = text.replace("\r\n", "\n").split("\n")
    return (NEWLINE_MARK + "\n").join(one_line(line) for line in lines)


def heat_parts(
    texts: Sequence[str | None],
    positions: Sequence[PositionLogprobs | None] | None,
    *,
    sample: int | None,
    cursor: Spot | None,
) -> list[Run]:
    """``texts`` (``None``: unknown, the first prompt token) as coloured runs, cursor marked."""
    parts: list[Run] = []
    for pos, text in enumerate(texts):
        entries = positions[pos] if positions is not None and pos < len(positions) else None
        style = band_of(probability(entries[0])).style if entries else ""
        shown = shown_token(text) if text is not None else "<?>"
        if text is None:
            style = _MUTED
        if cursor == (sample, pos):
            style = CURSOR  # the panel below names the token's band
        parts.append((shown, style) if style else shown)
    return parts


def prompt_texts(view: RequestView) -> list[str | None]:
    """Each prompt token's text as its prompt logprob entry decoded it (the first has none)."""
    positions = view.prompt_logprobs or ()
    return [entries[0].decoded if entries else None for entries in positions]


def spots(view: RequestView) -> list[Spot]:
    """Every token the cursor can stop on, in reading order: prompt tokens that have prompt
    logprobs, then each sample's tokens whose text is known (forks start from those)."""
    out: list[Spot] = []
    for pos, entries in enumerate(view.prompt_logprobs or ()):
        if entries:
            out.append((None, pos))
    for c in view.completions:
        texts = token_texts(c)
        if texts is not None:
            out.extend((c.index, pos) for pos in range(len(texts)))
    return out


def _entries_at(view: RequestView, spot: Spot) -> tuple[str, PositionLogprobs | None]:
    """Where the spot is, in words, and its logprob entries (``None`` without logprobs)."""
    sample, pos = spot
    if sample is None:
        positions = view.prompt_logprobs or ()
        return f"prompt token {pos}", positions[pos] if pos < len(positions) else None
    c = next((c for c in view.completions if c.index == sample), None)
    where = f"token {pos}" + (f" of sample {sample}" if len(view.completions) > 1 else "")
    if c is None or c.logprobs is None or pos >= len(c.logprobs):
        return where, None
    return where, c.logprobs[pos]


def _candidate(entry: LogprobEntry, chosen: bool) -> list[Part]:
    """One row: rank, token, probability, logprob; the chosen one marked in words too."""
    rank = "-" if entry.rank is None else str(entry.rank)
    prob = probability(entry)
    token = one_line(token_repr(entry.decoded, entry.token_id), 24)
    line = f"#{rank:<3} {token:<26} {prob:>6.1%}  logprob {entry.logprob:8.3f}"
    if chosen:
        return [(line, "bold"), " ", ("◀ chosen", "bold"), "\n"]
    return [line, "\n"]


def token_panel(view: RequestView | None, spot: Spot | None) -> Content:
    """The legend, then the token under the cursor and its top candidates by rank."""
    parts: list[Part] = [legend(), "\n"]
    if view is None or spot is None:
        parts.append(("No token to show yet: ← → move the cursor once tokens arrive.", _MUTED))
        return Content.assemble(*parts)
    where, entries = _entries_at(view, spot)
    if not entries:
        parts += [(where, "bold"), " ", ("· no logprobs for this token (ask for logprobs)", _MUTED)]
        return Content.assemble(*parts)
    chosen = entries[0]
    prob = probability(chosen)
    parts += [
        (where, "bold"),
        "  ",
        (one_line(token_repr(chosen.decoded, chosen.token_id), 30), band_of(prob).style),
        "  ",
        (f"id {chosen.token_id} · p {prob:.1%} · band {band_of(prob).label}", _MUTED),
        "\n",
    ]
    ranked = sorted(entries, key=lambda e: (e.rank is None, e.rank or 0))[:TOP_K]
    if chosen not in ranked:  # sampled far down the list: still show it, last
        ranked[-1] = chosen
    for entry in ranked:
        parts += _candidate(entry, entry is chosen)
    return Content.assemble(*parts[:-1])  # no line break after the last row
