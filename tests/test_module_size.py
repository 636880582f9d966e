"""Every source file stays small enough to read at once (the project's layout rule)."""

from __future__ import annotations

from pathlib import Path

import stepview

MAX_LINES = 450


def test_no_source_file_over_the_limit() -> None:
    package = Path(stepview.__file__).resolve().parent
    sizes = {
        str(path.relative_to(package)): len(path.read_text(encoding="utf-8").splitlines())
        for path in package.rglob("*.py")
    }
    assert sizes, "no source files found"
    too_big = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not too_big, f"split these by job (over {MAX_LINES} lines): {too_big}"
