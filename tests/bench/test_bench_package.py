"""``python -m benchmarks``: every benchmark is runnable by name, and the package's map names all.

The benchmarks are found by name (``benchmarks.BENCHMARKS``), not by file path; a benchmark
left out of the tuple could not be run, and a module left out of the package docstring is
one a newcomer does not know is there (as ``tests/test_package_maps.py`` holds for stepview).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import benchmarks
from benchmarks import BENCHMARKS
from tests.helpers import ROOT

PACKAGE = ROOT / "benchmarks"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _defines_main(module: str) -> bool:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    return any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body)


def test_the_runnable_names_are_the_modules_with_a_main() -> None:
    modules = sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem != "__main__")
    assert [m for m in modules if _defines_main(m)] == sorted(BENCHMARKS)


def test_every_module_is_named_in_the_package_docstring() -> None:
    named = set(re.findall(r"``([^`]+)``", benchmarks.__doc__ or ""))
    modules = {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    assert modules <= named, f"name each in benchmarks/__init__.py: {sorted(modules - named)}"


def test_list_names_each_benchmark_with_what_it_measures() -> None:
    for args in (("--list",), ()):
        done = _run(*args)
        assert done.returncode == 0, done.stderr
        listed = {line.split()[0]: line for line in done.stdout.splitlines() if line[:2] == "  "}
        assert sorted(listed) == sorted(BENCHMARKS)
        assert all(len(line.split()) > 3 for line in listed.values()), done.stdout


def test_an_unknown_name_says_so_in_one_line_with_the_valid_ones() -> None:
    for name in ("no_such_bench", "workload"):  # a shared module is not a benchmark
        done = _run(name, "--quick")
        assert done.returncode == 2
        assert done.stdout == ""
        [line] = done.stderr.splitlines()
        assert repr(name) in line
        assert all(bench in line for bench in BENCHMARKS), line
