"""The table of wait reasons (model/scheduling.py) is whole: every reason has its words, and
none is said twice, so every reader that derives from it (the state column, the metrics'
labels and help, the texts) finds what it needs there."""

from __future__ import annotations

from pathlib import Path

import stepview.model.scheduling as scheduling
from stepview.model.scheduling import REASON_OF, REASONS, UNKNOWN, WAIT_CODES, WORDS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "why-waiting.md"


def test_every_reason_has_a_code_a_word_a_label_and_a_sentence_each_its_own() -> None:
    for field in ("code", "word", "label", "sentence"):
        values = [getattr(reason, field) for reason in REASONS]
        assert all(values), field
        assert len(set(values)) == len(values), field
    assert WAIT_CODES == tuple(WORDS) == tuple(REASON_OF)
    assert WAIT_CODES[-1] == UNKNOWN  # the metrics list it last, after the nameable ones


def test_every_code_constant_is_in_the_table() -> None:
    constants = {
        value
        for name, value in vars(scheduling).items()
        if name.isupper() and isinstance(value, str)
    }
    assert constants == set(WAIT_CODES)


def test_the_manual_names_every_reason_a_request_can_be_given() -> None:
    text = DOCS.read_text(encoding="utf-8")
    missing = [code for code in WAIT_CODES if f"`{code}`" not in text]
    assert not missing
