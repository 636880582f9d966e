"""Text that did not originate in stepview, made harmless before it reaches a terminal.

A server's model name and labels (its ``/metrics``, Prometheus' targets API, a file_sd file),
the names inside a trace someone sent, a prompts file, the plug-in's records, vLLM's error
texts: another party chose them, and a terminal obeys what it is sent. Printed raw, an ESC
(or its 8-bit twin, a C1 control) starts a sequence that retitles the window, clears the
screen, moves the cursor or hides what follows; a bidi override reverses the rest of the
line, so that a command line copied from stepview's output is not the one read. So every
terminal write of stepview's — the TUI's cells (``ui/display.py``), the lines on stderr, the
headless text, the summaries, ``stepview check`` — goes through :func:`safe_char`'s rule:

* line breaks (``\\n``, ``\\r``, VT, FF, NEL, U+2028/2029...) end nothing: ``⏎`` in one line,
  a real line break only where a block of several lines is printed;
* a tab is a space;
* every other control — C0, DEL, C1 (ESC and CSI among them: the sequence after it is then
  plain, visible text), a lone surrogate, a private-use or unassigned code point — and every
  bidi override or isolate (U+202A-202E, U+2066-2069) becomes ``\\ufffd``, visible where it was;
* other format characters (zero-width joiners, soft hyphens) draw nothing and are dropped;
* odd spaces stay spaces.

JSON output stays exact: JSON escapes C0 itself, and :func:`json_line` escapes the rest (C1,
bidi, lone surrogates, the line separators) as ``\\uXXXX``, which decodes to the same string.

A lone surrogate is worse than a control: JSON can carry one (``"\\ud800"``), Python decodes
it, and then no UTF-8 file can hold it (a results file, a trace, an exported workload fail to
be written). Readers of JSON from outside look for one with :func:`lone_surrogate` (a prompts
file refuses the line) or put U+FFFD in its place with :func:`mend_surrogates` (a trace,
which stepview never writes so, is read on).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

NEWLINE_MARK = "⏎"
REPLACEMENT = "\ufffd"
LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""The embeddings, overrides and isolates: they reorder what follows them on the line."""

_RAW_IN_JSON = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""What ``json.dumps(..., ensure_ascii=False)`` leaves raw that a terminal obeys or that
cannot be encoded (a lone surrogate); C0 controls are escaped by JSON itself."""


def safe_char(ch: str, newline: str = NEWLINE_MARK) -> str:
    """What one character that is not plainly printable (``not ch.isprintable()``) becomes."""
    if ch in LINE_BREAKS:
        return newline
    if ch == "\t":
        return " "
    if ch in BIDI_CONTROLS:
        return REPLACEMENT
    category = unicodedata.category(ch)
    if category == "Zs":
        # Odd spaces (no-break, em, ideographic) draw as spaces; keep their width.
        return ch
    if category == "Cf":
        # Format characters draw nothing: joiners change how wide emoji are, a soft hyphen
        # shows only at a line's end. Dropped, they leave the text as it reads.
        return ""
    # Cc (C0, DEL, C1: ESC above all), Cs (a lone surrogate), Co, Cn.
    return REPLACEMENT


def terminal_line(text: str) -> str:
    """``text`` made harmless for one line of a terminal: line breaks shown as ``⏎``."""
    if text.isascii() and text.isprintable():
        return text  # the common case, at C speed
    return "".join(ch if ch.isprintable() else safe_char(ch) for ch in text.replace("\r\n", "\n"))


def terminal_text(text: str) -> str:
    """``text`` made harmless for a block of lines: its ``\\n`` kept, nothing else raw."""
    if text.isascii() and (text.isprintable() or text.replace("\n", "").isprintable()):
        return text
    return "\n".join(terminal_line(line) for line in text.replace("\r\n", "\n").split("\n"))


def json_line(dumped: str) -> str:
    """``dumped`` (``json.dumps(..., ensure_ascii=False)``) with what a terminal would obey
    escaped as ``\\uXXXX``: the same JSON value, safe to print and always encodable. Outside
    strings JSON holds only ASCII, so every such character is inside a string."""
    return _RAW_IN_JSON.sub(lambda found: f"\\u{ord(found.group()):04x}", dumped)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""How JSON text spells a surrogate; a pair (an emoji written as ASCII) decodes whole."""
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def may_hold_surrogates(json_text: str | bytes) -> bool:
    """Whether ``json_text`` spells a surrogate at all (cheap: most lines do not)."""
    if isinstance(json_text, bytes):
        return _SURROGATE_ESCAPE_BYTES.search(json_text) is not None
    return _SURROGATE_ESCAPE.search(json_text) is not None


def lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate in a decoded JSON ``value`` (its strings and keys), as
    ``\\udXXX``; ``None`` when it has none."""
    if isinstance(value, str):
        found = _LONE_SURROGATE.search(value)
        return None if found is None else f"\\u{ord(found.group()):04x}"
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, list):
        for item in value:
            found_in = lone_surrogate(item)
            if found_in is not None:
                return found_in
    return None


def mend_surrogates(value: Any) -> Any:
    """A decoded JSON ``value`` with U+FFFD in place of each lone surrogate."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, list):
        return [mend_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {mend_surrogates(k): mend_surrogates(v) for k, v in value.items()}
    return value
