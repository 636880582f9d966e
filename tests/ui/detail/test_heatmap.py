"""The logprob heat-map: bands by probability, the legend, the runs drawn and the token panel.

Plain values in, Textual ``Content`` out: no app needed, except for the detail screen check.
"""

from __future__ import annotations

import math

import pytest

from stepview.model.grow import Frozen
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import Completion, LogprobEntry, RequestState, RequestView, Timings
from stepview.ui.detail.heatmap import (
    BANDS,
    CURSOR,
    band_of,
    heat_parts,
    legend,
    probability,
    spots,
    token_panel,
)
from stepview.ui.drafts import fork_of, token_texts


def entry(token_id: int, p: float, rank: int, decoded: str) -> LogprobEntry:
    return LogprobEntry(token_id, math.log(p) if p else -math.inf, rank, decoded)


@pytest.mark.parametrize(
    ("p", "label"),
    [
        (1.0, "≥90%"),
        (0.9, "≥90%"),
        (0.89, "50-90%"),
        (0.5, "50-90%"),
        (0.3, "20-50%"),
        (0.1, "5-20%"),
        (0.049, "<5%"),
        (0.0, "<5%"),
        (float("nan"), "<5%"),
    ],
)
def test_band_by_probability(p: float, label: str) -> None:
    assert band_of(p).label == label


def test_low_bands_are_marked_without_colour_too() -> None:
    """With NO_COLOR only bold and underline remain: the two lowest bands keep a mark."""
    by_label = {b.label: b.style.split() for b in BANDS}
    assert "underline" in by_label["5-20%"] and "underline" in by_label["<5%"]
    assert "bold" in by_label["<5%"] and "bold" not in by_label["5-20%"]
    assert not {"bold", "underline"} & set(by_label["≥90%"] + by_label["50-90%"])
    assert "reverse" in CURSOR.split()  # the cursor is an inverse block without colour


def test_probability_is_exp_logprob_and_minus_infinity_is_zero() -> None:
    assert probability(entry(1, 0.25, 1, "a")) == pytest.approx(0.25)
    assert probability(LogprobEntry(1, -math.inf, 9, "a")) == 0.0


def test_legend_names_every_band_in_its_style() -> None:
    content = legend()
    for band in BANDS:
        start = content.plain.index(band.label)
        assert any(
            s.start == start and s.end == start + len(band.label) and str(s.style) == band.style
            for s in content.spans
        )
    assert "no logprobs" in content.plain


def test_runs_are_styled_by_band_plain_without_logprobs_and_cursor_marked() -> None:
    positions = [
        (entry(1, 0.95, 1, "a"),),
        (entry(2, 0.3, 2, "b"),),
        None,
        (entry(4, 0.01, 7, "d"),),
    ]
    parts = heat_parts(["a", "b\n", "c", ""], positions, sample=0, cursor=(0, 3))
    assert parts == [
        ("a", "ansi_green"),
        ("b⏎\n", "ansi_black on ansi_yellow"),
        "c",  # no logprobs: plain
        ("∅", CURSOR),  # an empty token stays visible; the cursor overrides its band
    ]


def _view(**fields: object) -> RequestView:
    base = RequestView("r3", "Hi", SamplingSpec(logprobs=3), RequestState.FINISHED, Timings(0.0))
    return base._replace(**fields)


def _sample() -> Completion:
    lps = Frozen(
        [
            (entry(10, 0.8, 1, " the"), entry(11, 0.1, 2, " a")),
            (entry(20, 0.04, 3, " cat"), entry(21, 0.5, 1, " dog"), entry(22, 0.3, 2, " cow")),
        ]
    )
    return Completion.of_text(0, " the cat", token_ids=Frozen([10, 20]), logprobs=lps)


def test_panel_shows_the_cursor_token_and_its_candidates_by_rank() -> None:
    view = _view(completions=(_sample(),))
    text = token_panel(view, (0, 1)).plain
    lines = text.splitlines()
    assert lines[0].startswith("p(token)")
    assert "token 1" in lines[1] and "' cat'" in lines[1] and "p 4.0%" in lines[1]
    assert "band <5%" in lines[1]
    # Ranked: dog (1), cow (2), then the chosen cat (3), marked in words.
    assert lines[2].startswith("#1") and "' dog'" in lines[2] and "50.0%" in lines[2]
    assert lines[3].startswith("#2") and "' cow'" in lines[3]
    assert lines[4].startswith("#3") and "' cat'" in lines[4] and lines[4].endswith("◀ chosen")


def test_panel_without_logprobs_says_so() -> None:
    plain = Completion.of_text(0, "xy", token_ids=Frozen([1]))
    view = _view(completions=(plain,))
    assert "no logprobs for this token" in token_panel(view, (0, 0)).plain
    assert "No token" in token_panel(None, None).plain


def test_spots_cover_prompt_tokens_with_logprobs_then_each_sample() -> None:
    prompt_lps = (None, (entry(5, 0.5, 1, "i"),))
    view = _view(prompt_logprobs=prompt_lps, completions=(_sample(),))
    assert spots(view) == [(None, 1), (0, 0), (0, 1)]


def test_token_texts_prefer_one_piece_per_token_then_decoded_logprobs() -> None:
    pieces = Completion(0, Frozen([" the", " cat"]), Frozen([10, 20]))
    assert token_texts(pieces) == [" the", " cat"]
    assert token_texts(_sample()) == [" the", " cat"]  # one piece: from the logprobs
    assert token_texts(Completion.of_text(0, " the cat", token_ids=Frozen([10, 20]))) is None


def test_fork_of_keeps_the_token_under_the_cursor() -> None:
    view = _view(completions=(_sample(),))
    draft = fork_of(view, 0, 0)
    assert draft is not None and draft.prompt == "Hi the"
    assert draft.lineage is not None and draft.lineage.label() == "fork of r3 @ token 0"
    assert fork_of(view, 0, 2) is None and fork_of(view, 1, 0) is None
