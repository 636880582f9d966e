"""The package layout holds: no import cycle, and each layer imports only what it may.

Read from the source (every ``import``, at the top of a module or inside a function), not
from an interpreter, so a lazy import that only runs on one code path counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import stepview

PACKAGE = Path(stepview.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each stepview module and the stepview modules it imports (a package counts as one)."""
    files = {_module_name(path): path for path in PACKAGE.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets.extend(f"{base}.{alias.name}" for alias in node.names)
        resolved = (resolve(t) for t in targets if t.split(".")[0] == "stepview")
        graph[module] = {r for r in resolved if r is not None and r != module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules around it, or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        path.append(module)
        for target in sorted(graph[module]):
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        done.add(module)
        return None

    return next((c for c in map(visit, sorted(graph)) if c), None)


def test_no_import_cycle() -> None:
    assert find_cycle(import_graph()) is None


def test_the_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_only_the_command_line_imports_the_launch_package() -> None:
    importers = {
        module
        for module, targets in import_graph().items()
        if not module.startswith("stepview.launch")
        and any(t.startswith("stepview.launch") for t in targets)
    }
    assert importers == {"stepview.cli"}


def test_engine_and_trace_know_nothing_of_the_command_line_or_the_ui() -> None:
    """stepview's flags stay in ``cli_args`` and ``launch``; trace files need no engine."""
    banned = ("stepview.cli", "stepview.cli_args", "stepview.launch", "stepview.ui")
    for module, targets in import_graph().items():
        if module.startswith(("stepview.engine", "stepview.trace", "stepview.model")):
            assert not [t for t in targets if t.startswith(banned)], module
        if module.startswith(("stepview.trace", "stepview.model")):
            assert not [t for t in targets if t.startswith("stepview.engine")], module
