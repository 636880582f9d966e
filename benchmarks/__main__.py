"""``python -m benchmarks NAME [args...]`` runs one benchmark; ``--list`` (or nothing) names them.

One entry point for all of them, run from the repository root, so that no benchmark needs to
be found by file path or edit ``sys.path``: NAME's module is imported as ``benchmarks.NAME``
and its ``main`` gets the remaining arguments (``python -m benchmarks ui_scale --quick``;
``python -m benchmarks NAME --help`` for its own flags). The list reads each module's
docstring without importing it, so it works on a machine without vLLM or tmux.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks import BENCHMARKS

PROG = "python -m benchmarks"


def summary(name: str) -> str:
    """The first line of the benchmark's module docstring: what it measures."""
    source = Path(__file__).with_name(f"{name}.py").read_text(encoding="utf-8")
    docstring = ast.get_docstring(ast.parse(source)) or ""
    return docstring.split("\n", 1)[0]


def listing() -> str:
    width = max(map(len, BENCHMARKS))
    lines = [f"usage: {PROG} NAME [args...]   (from the repository root)", "", "benchmarks:"]
    lines += [f"  {name:<{width}}  {summary(name)}" for name in BENCHMARKS]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("--list", "-l", "--help", "-h"):
        print(listing())
        return 0
    name, rest = args[0], args[1:]
    if name not in BENCHMARKS:
        print(
            f"{PROG}: no benchmark named {name!r}; choose one of: {', '.join(BENCHMARKS)}",
            file=sys.stderr,
        )
        return 2
    sys.argv = [f"{PROG} {name}", *rest]  # argparse's usage and errors name the real command
    module = importlib.import_module(f"benchmarks.{name}")
    code: int = module.main(rest)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
