"""docs/architecture.md names what is in the tree: every path it gives exists, every name it
sends a reader to is in the file it names, and its Layout has every package of stepview/.

The page is where a newcomer starts, and it drifts as modules move: a function renamed or moved
to another module leaves a line that sends the reader to a file where it is not (the recipe
for a new request field sent readers to ``_freeze`` in ``engine/driver/ledger.py`` long after
it became ``freeze`` in ``engine/driver/freezing.py``). What is checked, in code spans outside
fenced blocks:

* a path (``engine/watch/link/attached.py``, ``engine/plugin/``) exists: under the repository
  when its first part is one of the repository's folders (``tests/``, ``docs/``), else under
  ``stepview/`` (as the Feature → files table says of its paths);
* a bare file or folder name (``metrics_source.py``, ``link/``) is in the folder of the path
  before it in the same table cell or paragraph (``engine/plugin/`` (``scheduler.py``)), or
  (a folder) is a path as above;
* a name in parentheses right after a ``.py`` path (``engine/records/waiting_reasons.py``
  (``step_budget``)), or written ``name`` in ``path.py``, is in that file: defined there (a
  function, a class, a method, an assignment), used there (``SIGUSR1``, vLLM's
  ``SamplingParams``) or a string it holds. Keys (``F``), flags (``--summary``), a format's
  quoted keys (``"timeline"``: made wherever the record is) and phrases are left alone.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "stepview"
DOC = ROOT / "docs" / "architecture.md"

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
SPAN = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^[A-Za-z_][\w.-]*(?:/[\w.-]+)*/?$")
BARE_FILE = re.compile(r"^[\w-]+\.(?:py|md|toml|sh)$")
BARE_FOLDER = re.compile(r"^[\w-]+/$")
NAME = re.compile(r"^_*[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class Span:
    """A code span of the page: its text and where it is in its unit (cell or paragraph)."""

    text: str
    start: int
    end: int


def _page() -> str:
    return DOC.read_text(encoding="utf-8")


def _fenced_blocks(text: str) -> tuple[list[str], list[list[str]]]:
    """The page's lines outside fenced blocks (those inside blanked), and each block's lines."""
    outside: list[str] = []
    blocks: list[list[str]] = []
    fence: str | None = None
    for line in text.split("\n"):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
            blocks.append([])
            outside.append("")
        elif fence is not None:
            if line.strip().startswith(fence[0] * len(fence)) and not line.strip(fence[0]):
                fence = None
            else:
                blocks[-1].append(line)
            outside.append("")
        else:
            outside.append(line)
    return outside, blocks


def _units(text: str) -> list[str]:
    """The page outside its fences as units a path's context holds within: each cell of a
    table row, each other paragraph."""
    outside, _ = _fenced_blocks(text)
    units: list[str] = []
    paragraph: list[str] = []
    for line in [*outside, ""]:
        if line.lstrip().startswith("|"):
            units.extend(cell for cell in line.strip().strip("|").split("|") if cell.strip())
        elif line.strip():
            paragraph.append(line)
            continue
        if paragraph:
            units.append("\n".join(paragraph))
            paragraph = []
    return units


def _spans(unit: str) -> list[Span]:
    return [Span(m.group(1).strip(), m.start(), m.end()) for m in SPAN.finditer(unit)]


def _resolve(path: str) -> Path:
    """A path as the page means it: from the repository's root when its first part is a
    folder there, else under stepview/."""
    first = path.split("/", 1)[0]
    if first != "stepview" and (ROOT / first).is_dir() and not (PACKAGE / first).exists():
        return ROOT / path
    return ROOT / path if first == "stepview" else PACKAGE / path


def _is_path(text: str) -> bool:
    return "/" in text and PATH.match(text) is not None and "://" not in text


def _in_parentheses(unit: str, after: int) -> tuple[int, int] | None:
    """Where the parentheses that open right after position ``after`` in ``unit`` end."""
    opened = re.match(r"\s*\(", unit[after:])
    if opened is None:
        return None
    depth = 0
    for index in range(after + opened.end() - 1, len(unit)):
        depth += {"(": 1, ")": -1}.get(unit[index], 0)
        if depth == 0:
            return after + opened.end(), index
    return None


@cache
def _names_in(file: Path) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """What ``file`` defines, the strings it holds, and every name it uses."""
    tree = ast.parse(file.read_text(encoding="utf-8"))
    defined: set[str] = set()
    strings: set[str] = set()
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Name):
                        defined.add(part.id)
                    elif isinstance(part, ast.Attribute):
                        defined.add(part.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.add(node.value)
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
    return frozenset(defined), frozenset(strings), frozenset(used)


def _name_problem(name: str, file: Path) -> str | None:
    """Why ``name`` (a span the page sends to ``file``) is not there, or None when it is."""
    if NAME.match(name) is None or len(name) < 3:
        return None  # a key, a flag, a quoted key of a format, a phrase: not a name in the file
    defined, strings, used = _names_in(file)
    last = name.rsplit(".", 1)[-1]
    if not (last in defined or last in used or last in strings):
        return f"`{name}` is not in {file.relative_to(ROOT)}"
    return None


def _problems(text: str) -> list[str]:
    problems: list[str] = []
    for unit in _units(text):
        spans = _spans(unit)
        folder: Path | None = None
        for index, span in enumerate(spans):
            file: Path | None = None
            if (
                folder is not None
                and BARE_FOLDER.match(span.text)
                and (folder / span.text).is_dir()
            ):
                continue  # ``link/`` after ``engine/watch/``: a folder of the one before
            if _is_path(span.text):
                target = _resolve(span.text)
                if not target.exists():
                    problems.append(f"`{span.text}`: no {target.relative_to(ROOT)}")
                    continue
                folder = target if target.is_dir() else target.parent
                file = target if target.suffix == ".py" else None
            elif BARE_FILE.match(span.text) and folder is not None:
                target = folder / span.text
                if not target.exists():
                    problems.append(f"`{span.text}` (after {folder.relative_to(ROOT)}/): "
                                    f"no {target.relative_to(ROOT)}")  # fmt: skip
                    continue
                file = target if target.suffix == ".py" else None
            if file is not None:
                inside = _in_parentheses(unit, span.end)
                if inside is not None:
                    for named in spans[index + 1 :]:
                        if inside[0] <= named.start and named.end <= inside[1]:
                            problems.append(_name_problem(named.text, file) or "")
            following = spans[index + 1] if index + 1 < len(spans) else None
            if (
                following is not None
                and re.fullmatch(r"\s+in\s+", unit[span.end : following.start])
                and _is_path(following.text)
                and following.text.endswith(".py")
                and _resolve(following.text).is_file()
            ):
                problems.append(_name_problem(span.text, _resolve(following.text)) or "")
    return [problem for problem in problems if problem]


def _layout(text: str) -> list[str]:
    """The fenced block under the page's ``## Layout`` heading."""
    section = text.split("\n## Layout", 1)[1].split("\n## ", 1)[0]
    _, blocks = _fenced_blocks(section)
    assert blocks, "no fenced block under ## Layout"
    return blocks[0]


def _unmapped_packages(text: str) -> list[str]:
    """Packages of stepview/ the Layout does not show: a top-level one as an entry of its own
    (``  engine/``), one deeper by its name (``link/``) within its top-level package's entry."""
    layout = _layout(text)
    entries: dict[str, str] = {}
    current: str | None = None
    for line in layout:
        top = re.match(r"^  ([\w]+)/", line)
        if top:
            current = top.group(1)
            entries[current] = ""
        elif line[:1].strip():  # another root entry (tests/, docs/): stepview/'s are done
            current = None
        if current is not None:
            entries[current] += line + "\n"
    missing: list[str] = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        parts = init.parent.relative_to(PACKAGE).parts
        if not parts:
            continue
        entry = entries.get(parts[0])
        if entry is None or (
            len(parts) > 1 and not re.search(rf"(?<![\w/]){re.escape(parts[-1])}/", entry)
        ):
            missing.append("/".join(parts) + "/")
    return missing


def test_every_path_and_name_the_page_gives_is_in_the_tree() -> None:
    text = _page()
    assert "## Feature → files" in text and "engine/driver/" in text, f"{DOC} lost its table"
    problems = _problems(text)
    assert not problems, f"{DOC.relative_to(ROOT)} sends readers where nothing is: {problems}"


def test_the_layout_shows_every_package() -> None:
    missing = _unmapped_packages(_page())
    assert not missing, f"add these to the Layout of {DOC.relative_to(ROOT)}: {missing}"


def test_the_checks_catch_a_moved_name_and_a_missing_path() -> None:
    """The checks above fail on what drifted before: a name sent to the wrong file, a path
    that is gone, a bare file that is not in its folder, a package the Layout lacks."""
    drifted = (
        "Set where the ledger builds views (`_freeze` in `engine/driver/ledger.py`).\n\n"
        "| a | `engine/records/waiting_reasons.py` (`step_budget`, `no_such_rule`) "
        "| `engine/watch/no_such.py` | `engine/plugin/` (`capture.py`, `gone.py`) |\n"
    )
    assert _problems(drifted) == [
        "`_freeze` is not in stepview/engine/driver/ledger.py",
        "`no_such_rule` is not in stepview/engine/records/waiting_reasons.py",
        "`engine/watch/no_such.py`: no stepview/engine/watch/no_such.py",
        "`gone.py` (after stepview/engine/plugin/): no stepview/engine/plugin/gone.py",
    ]
    fixed = "`freeze` in `engine/driver/freezing.py`; `engine/watch/` (`link/`, `api/`)"
    assert _problems(fixed) == []
    layout = "\n## Layout\n\n```\nstepview/\n  engine/         rooms: plugin/, own/\n```\n"
    assert "engine/watch/link/" in _unmapped_packages(layout)
    assert "ui/" in _unmapped_packages(layout)
    assert "engine/own/" not in _unmapped_packages(layout)
