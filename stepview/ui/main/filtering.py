"""The `/` filter: which requests the panes show.

A query is words. ``is:WORD`` keeps requests whose state (``waiting``, ``decoding``,
``aborted``, ``rejected``, …) or finish reason (``stop``, ``length``) is WORD; any other
word must appear in the request id or the prompt (case-insensitive). All words must match.
Plain data, no Textual, so the rule is tested on its own and applied to 10 000 rows cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepview.model.chat import headline
from stepview.model.snapshot import RequestView

# How much of a prompt text search looks at: enough to find what a row shows, bounded so a
# 100 kB prompt does not make every filter pass slow.
_SEARCH_CHARS = 4096


@dataclass(frozen=True, slots=True)
class RequestFilter:
    """A parsed query; :meth:`matches` is the whole rule."""

    query: str = ""
    kinds: tuple[str, ...] = ()
    words: tuple[str, ...] = ()

    @classmethod
    def parse(cls, query: str) -> RequestFilter:
        kinds: list[str] = []
        words: list[str] = []
        for part in query.lower().split():
            if part.startswith("is:") and len(part) > 3:
                kinds.append(part[3:])
            else:
                words.append(part)
        return cls(query.strip(), tuple(kinds), tuple(words))

    @property
    def active(self) -> bool:
        return bool(self.kinds or self.words)

    def matches(self, view: RequestView) -> bool:
        for kind in self.kinds:
            if kind != view.state.value and not any(
                c.finish_reason == kind for c in view.completions
            ):
                return False
        if self.words:
            prompt = headline(view.prompt, view.messages)
            haystack = f"{view.request_id}\n{prompt[:_SEARCH_CHARS]}".lower()
            return all(word in haystack for word in self.words)
        return True
