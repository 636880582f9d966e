"""The samples of a ``/metrics`` page's lines: read by a lean reader where the text is plain,
by ``prometheus_client``'s parser wherever it is not.

prometheus_client's parser is written for every corner of the text format (quoted names,
escapes, timestamps, exemplars) in pure Python, character by character: the ~150 lines
stepview reads off a page took it 3 ms, and a fleet of a thousand servers has a couple of
hundred pages to read every second. A page as vLLM (prometheus_client's own writer) serves
it has none of those corners: ``# HELP`` and ``# TYPE`` lines, and samples
``name{label="value",…} number``. :func:`page_samples` reads such lines with one regular
expression each (a tenth of the time) and the families as the parser groups them (its rules
restated in :func:`plain_samples`); the first line that is anything else (a backslash, a timestamp,
a space too many, a type it does not know, a label repeated or reserved) hands the whole text
to the parser, so that what a page says is always what the parser says
(``tests/engine/watch/test_page_samples.py`` holds the two equal on the captured pages and
on Hypothesis' mutations of them; ``tests/fuzz`` fuzzes both paths).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families


class PageSample(NamedTuple):
    """One sample: its family's name and type (prometheus_client's: a counter's family has
    no ``_total``, an untyped one is ``unknown``), its own name, labels and value."""

    family: str
    kind: str
    name: str
    labels: dict[str, str]
    value: float


_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"'
_VALUE = r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?Inf|NaN"
_LINE = re.compile(
    rf"# HELP (?P<help>{_NAME})(?: .*)?"
    rf"|# TYPE (?P<type>{_NAME}) (?P<kind>counter|gauge|histogram|summary)"
    rf"|(?P<name>{_NAME})(?:\{{(?P<labels>(?:{_LABEL}(?:,{_LABEL})*)?)\}})? (?P<value>{_VALUE})"
)
_LABELS = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')
_ALLOWED = {"histogram": ("_count", "_sum", "_bucket"), "summary": ("_count", "_sum", "")}
"""The sample names a family of each type takes, as suffixes of its name (others: none)."""


def page_samples(lines: str) -> list[PageSample]:
    """Every sample of ``lines`` (Prometheus text), in order; ``ValueError`` where the
    parser finds the text broken."""
    plain = plain_samples(lines)
    return plain if plain is not None else parsed_samples(lines)


def parsed_samples(lines: str) -> list[PageSample]:
    """prometheus_client's reading."""
    return [
        PageSample(family.name, family.type, sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(lines)
        for sample in family.samples
    ]


class _Family:
    """A family being read: its name, type and the sample names it takes (the parser's)."""

    __slots__ = ("allowed", "kind", "name", "samples")

    def __init__(self, name: str, kind: str, allowed: tuple[str, ...]) -> None:
        self.name, self.kind, self.allowed = name, kind, allowed
        self.samples: list[tuple[str, dict[str, str], float]] = []

    def typed(self, kind: str) -> None:
        self.kind = kind
        self.allowed = tuple(self.name + s for s in _ALLOWED.get(kind, ("",)))

    def done(self, out: list[PageSample]) -> None:
        """Its samples, as the parser names them: a counter's family loses ``_total``, or
        where it has none, its samples gain it."""
        name, kind = self.name, "unknown" if self.kind == "untyped" else self.kind
        renamed = kind == "counter" and not name.endswith("_total")
        if kind == "counter" and not renamed:
            name = name[: -len("_total")]
        for sample, labels, value in self.samples:
            named = sample + "_total" if renamed else sample
            out.append(PageSample(name, kind, named, labels, value))


def plain_samples(lines: str) -> list[PageSample] | None:
    """The samples of ``lines`` if every line is plain; ``None``: one is not."""
    out: list[PageSample] = []
    family = _Family("", "untyped", ())
    match = _LINE.fullmatch
    for line in lines.split("\n"):
        if not line:
            continue
        found = match(line)
        if found is None:
            return None
        name = found["name"]
        if name is None:  # a HELP or TYPE line: a new family unless it names the current one
            named = found["help"] or found["type"]
            if named != family.name:
                if family.name:
                    family.done(out)
                family = _Family(named, "untyped", (named,))
            if found["kind"] is not None:
                family.typed(found["kind"])
            continue
        labels = _labels(found["labels"])
        if labels is None:
            return None
        value = _number(found["value"])
        if name in family.allowed:
            family.samples.append((name, labels, value))
            continue
        if family.name:  # a sample of no family announced: a family of its own, untyped
            family.done(out)
        family = _Family("", "untyped", ())
        out.append(PageSample(name, "unknown", name, labels, value))
    if family.name:
        family.done(out)
    return out


def _labels(text: str | None) -> dict[str, str] | None:
    """A plain label set's labels; ``None`` where the parser has more to say (a label
    repeated, or reserved: ``__name__`` and the like). Each text read once: a server's pages
    repeat the same label sets every scrape, and reading them was a third of a page's time
    at fleet size; the dict is shared between the samples that have the text (read, never
    changed)."""
    if not text:
        return {}
    return _labels_of(text)


@lru_cache(maxsize=8192)
def _labels_of(text: str) -> dict[str, str] | None:
    pairs = _LABELS.findall(text)
    labels = dict(pairs)
    if len(labels) != len(pairs) or ("__" in text and any(n.startswith("__") for n in labels)):
        return None
    return labels


def _number(text: str) -> float:
    """A sample's value as the parser reads it: ``int()``'s if it reads it (digits alone,
    with a sign or not, and not more of them than Python converts), else ``float()``'s."""
    digits = text[1:] if text[0] in "+-" else text
    if digits.isdigit():
        try:
            return int(text)
        except ValueError:  # too many digits for int(): float() reads them
            pass
    return float(text)
