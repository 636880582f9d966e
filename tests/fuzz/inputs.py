"""What the fuzz tests feed the parsers: broken input (random bytes, text, JSON values) and
valid-looking input (a real sample with some of its values replaced, dropped or added).

A mutation keeps most of a sample (so a parser gets past its first check and into the code
that reads values) and changes a few places: a value replaced by any JSON value, a key
dropped or added, a list item removed or duplicated. Hypothesis shrinks it to the smallest
change that fails.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.profiles import MAX_INPUT

# Strings that reach deep parsers' corners: controls, surrogates spelled in JSON, numbers as
# text, the words vLLM and Prometheus use.
WORDS = st.sampled_from(
    [
        "",
        "0",
        "-1",
        "1e309",
        "NaN",
        "inf",
        "null",
        "vllm:",
        "/metrics",
        "http://",
        "https://[::1",
        "a:1",
        "\x1b[2J",
        "\u202e",
        "\ud800",
        "\x00",
        "le",
        "+Inf",
        "finished",
        "user",
        "content",
    ]
)
SCALARS: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=24),
    WORDS,
)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(max_size=10) | WORDS, inner, max_size=5)
    ),
    max_leaves=24,
)
DEEP = st.builds(
    lambda opener, depth: opener * depth,
    st.sampled_from(["[", '{"a":', "- ", '[{"k": ']),
    st.integers(min_value=500, max_value=12_000),
)
"""Nesting deeper than Python's JSON and YAML readers recurse (a RecursionError, not a
ValueError), within the size bound."""
TEXT = st.text(max_size=2_000) | DEEP
BYTES = st.binary(max_size=2_000) | DEEP.map(str.encode)


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> Any:
    """``value`` (a JSON-like sample) with a few places changed."""
    roll = draw(st.integers(0, 19))
    if roll == 0:
        return draw(JSON_VALUES)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            choice = draw(st.integers(0, 15))
            if choice == 0:
                continue  # dropped
            out[key] = draw(mutated(item)) if choice <= 4 else item
        if draw(st.integers(0, 9)) == 0:
            out[draw(st.text(max_size=8) | WORDS)] = draw(JSON_VALUES)
        return out
    if isinstance(value, list):
        items: list[Any] = []
        for item in value[:64]:
            choice = draw(st.integers(0, 15))
            if choice == 0:
                continue
            items.append(draw(mutated(item)) if choice <= 4 else item)
            if choice == 15:
                items.append(item)  # twice
        return items
    if roll <= 2:
        return draw(SCALARS)
    if isinstance(value, str) and roll <= 5:  # a piece spliced in: "http://[127.0.0.1..."
        at = draw(st.integers(0, len(value)))
        piece = draw(WORDS | st.sampled_from(list('[]:/?#%@"\\{}')))
        return value[:at] + piece + value[at:]
    return value


def dumps(value: Any) -> str:
    """``value`` as one JSON line, as Python writes it (``NaN`` too), cut to the size bound."""
    return json.dumps(value, default=str)[:MAX_INPUT]


@st.composite
def json_lines(draw: st.DrawFn, samples: list[Any]) -> list[str]:
    """Lines of JSON drawn from ``samples``, mutated, in the samples' order with some lines
    dropped, repeated or replaced by noise."""
    lines: list[str] = []
    for sample in samples:
        choice = draw(st.integers(0, 19))
        if choice == 0:
            continue
        if choice == 1:
            lines.append(draw(st.text(max_size=200)))
            continue
        lines.append(dumps(draw(mutated(sample))) if choice <= 6 else dumps(sample))
        if choice == 19:
            lines.append(lines[-1])
    return lines


def json_samples(text: str) -> list[Any]:
    """The JSON lines of a sample file."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]
