"""Every relative link and image in README.md and docs/ points at a file that exists, and every
``#anchor`` at a heading of its page.

The manual is spread over pages that link to each other's sections; a heading renamed or a page
moved leaves links that GitHub shows as working and that lead nowhere. Anchors are matched the
way GitHub makes them from a heading (github-slugger): the heading's text as rendered (code
spans and links reduced to their text), lowercased, every character dropped that is not a
letter, a digit, a space, ``-`` or ``_``, then each space made a hyphen; a repeated heading
gets ``-1``, ``-2``, ... So ``Watching `vllm serve` (`--attach`)`` is
``#watching-vllm-serve---attach`` and ``Why is it waiting? — reasons`` is
``#why-is-it-waiting--reasons``. Links to other sites are not fetched: no network, no vLLM.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# A code span may run over a line break, never over a blank line (the paragraph's end).
CODE_SPAN = re.compile(r"(`+)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.DOTALL)
# [text](target "title") and ![alt](target), the text holding at most one level of brackets
# (an image inside a link).
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"
)
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*(<[^>]*>|\S+)", re.MULTILINE)
HTML_TARGET = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]+)\"", re.IGNORECASE)
HTML_ANCHOR = re.compile(r"<a\b[^>]*?\b(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading with this (Markdown) text."""
    text = CODE_SPAN.sub(lambda m: m.group(2).strip(), heading)
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    kept = (c for c in text.strip().lower() if c.isalnum() or c in "-_ ")
    return "".join(kept).replace(" ", "-")


def _blank(match: re.Match[str]) -> str:
    """The match's text as spaces, its line breaks kept, so that line numbers still hold."""
    return re.sub(r"[^\n]", " ", match.group(0))


def _without_fences(text: str) -> str:
    """The page with every fenced code block blanked (a line stays a line)."""
    lines = text.split("\n")
    fence: str | None = None
    for number, line in enumerate(lines):
        opened = FENCE.match(line)
        if fence is None:
            if opened:
                fence = opened.group(1)
                lines[number] = ""
            continue
        if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
            fence = None
        lines[number] = ""
    return "\n".join(lines)


def anchors(text: str) -> set[str]:
    """Every anchor a page has: one per heading (repeats numbered as GitHub does), and the
    ``id`` or ``name`` of an HTML ``<a>``."""
    text = COMMENT.sub(_blank, _without_fences(text))
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in text.split("\n"):
        heading = HEADING.match(line)
        if heading is None:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    found.update(HTML_ANCHOR.findall(text))
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every link and image the page renders: not those in code."""
    text = CODE_SPAN.sub(_blank, COMMENT.sub(_blank, _without_fences(text)))
    targets = [(m.start(), m.group(1)) for m in INLINE_LINK.finditer(text)]
    targets += [(m.start(), m.group(1)) for m in REFERENCE.finditer(text)]
    targets += [(m.start(), m.group(1)) for m in HTML_TARGET.finditer(text)]
    return [
        (text.count("\n", 0, start) + 1, target.strip("<>")) for start, target in sorted(targets)
    ]


def problems(root: Path, pages: Iterable[Path]) -> list[str]:
    """Each link of ``pages`` that leads nowhere, as ``page:line: target: why``."""
    found: list[str] = []
    page_anchors: dict[Path, set[str]] = {}

    def anchors_of(page: Path) -> set[str]:
        if page not in page_anchors:
            page_anchors[page] = anchors(page.read_text(encoding="utf-8"))
        return page_anchors[page]

    for page in pages:
        for line, target in links(page.read_text(encoding="utf-8")):
            where = f"{page.relative_to(root)}:{line}: {target}"
            if SCHEME.match(target):
                continue  # another site (https:, mailto:): not fetched
            path, _, anchor = target.partition("#")
            path = unquote(path)
            if path.startswith("/"):
                resolved = (root / path.lstrip("/")).resolve()
            else:
                resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                found.append(f"{where}: no such file")
            elif anchor and resolved.suffix == ".md":
                if unquote(anchor) not in anchors_of(resolved):
                    found.append(f"{where}: no heading of {resolved.name} has this anchor")
            elif not path and not anchor:
                found.append(f"{where}: an empty link")
    return found


def documentation() -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_link_and_anchor_leads_somewhere() -> None:
    pages = documentation()
    assert len(pages) > 5, f"too few pages found: {pages}"
    checked = sum(len(links(page.read_text(encoding="utf-8"))) for page in pages)
    assert checked > 50, f"too few links found ({checked}): is the link pattern broken?"
    broken = problems(ROOT, pages)
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_every_page_is_in_the_index() -> None:
    """docs/README.md lists every page of docs/, so none is found only by chance."""
    index = ROOT / "docs" / "README.md"
    listed = {
        (index.parent / unquote(target.partition("#")[0])).resolve()
        for _, target in links(index.read_text(encoding="utf-8"))
        if not SCHEME.match(target)
    }
    pages = {page.resolve() for page in (ROOT / "docs").rglob("*.md") if page != index}
    missing = sorted(str(page.relative_to(ROOT)) for page in pages - listed)
    assert not missing, f"add these to docs/README.md: {missing}"


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Quick start", "quick-start"),
        ("Why is it waiting? — reasons, timelines", "why-is-it-waiting--reasons-timelines"),
        ("Watching `vllm serve` (`--attach`)", "watching-vllm-serve---attach"),
        ("Prometheus metrics (`--metrics-port`)", "prometheus-metrics---metrics-port"),
        ("stepview's own flags", "stepviews-own-flags"),
        ("Feature → files", "feature--files"),
        ("A 4 000-request queue, watched", "a-4-000-request-queue-watched"),
        ("Workbench: what if the load doubles?", "workbench-what-if-the-load-doubles"),
        ("The [flight recorder](x.md) and `max_num_seqs`", "the-flight-recorder-and-max_num_seqs"),
        ("Exports: Perfetto and CSV ", "exports-perfetto-and-csv"),
    ],
)
def test_slug_follows_github(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    """The check can fail: a missing file, a missing anchor and a wrong one on another page
    are each reported, while links in code, comments and to other sites are left alone."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "pic.svg").write_text("<svg/>", encoding="utf-8")
    (tmp_path / "docs" / "other.md").write_text(
        "# Other\n\n## Why? — this\n\n## Why? — this\n", encoding="utf-8"
    )
    page = tmp_path / "README.md"
    page.write_text(
        "# Top\n\n"
        "![ok](pic.svg) [ok](docs/other.md#why--this-1) [ok](#top) [ok](https://example.com/x)\n"
        "[gone](docs/gone.md) ![gone](missing.svg)\n"
        "[bad](docs/other.md#why-this) [bad](#nowhere)\n"
        "`[code](not-a-link.md)`\n\n"
        "```\n[fenced](not-a-link.md)\n```\n"
        "<!-- [comment](not-a-link.md) -->\n",
        encoding="utf-8",
    )
    found = problems(tmp_path, [page])
    assert [entry.split(": ")[0:2] for entry in found] == [
        ["README.md:4", "docs/gone.md"],
        ["README.md:4", "missing.svg"],
        ["README.md:5", "docs/other.md#why-this"],
        ["README.md:5", "#nowhere"],
    ], found
