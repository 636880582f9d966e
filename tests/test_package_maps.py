"""Every package's docstring maps its modules, so a newcomer finds their room from it.

Each ``__init__`` docstring says which module does what and why it lives there: whoever opens a
package learns where to look before opening its files. The maps rot as modules are added and
nobody thinks of the ``__init__``, so this holds every module, and every sub-package, to being
named in its package's docstring in double backticks: ``name`` (or ``name.py``) for a module,
``name/`` for a sub-package, alone or in a group such as ``a`` / ``b``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import stepview

PACKAGE_ROOT = Path(stepview.__file__).resolve().parent
SOURCE_ROOT = PACKAGE_ROOT.parent
NAMED = re.compile(r"``([^`]+)``")


def _packages() -> list[Path]:
    return sorted(init.parent for init in PACKAGE_ROOT.rglob("__init__.py"))


def _named_in_docstring(package: Path) -> set[str]:
    tree = ast.parse((package / "__init__.py").read_text(encoding="utf-8"))
    return set(NAMED.findall(ast.get_docstring(tree) or ""))


def test_every_module_is_named_in_its_package_docstring() -> None:
    modules: list[str] = []
    unmapped: list[str] = []
    for package in _packages():
        named = _named_in_docstring(package)
        for module in sorted(package.glob("*.py")):
            if module.name == "__init__.py":
                continue
            modules.append(module.name)
            if module.stem not in named and module.name not in named:
                unmapped.append(str(module.relative_to(SOURCE_ROOT)))
    assert len(modules) > 100, f"too few modules found under {PACKAGE_ROOT}: {len(modules)}"
    assert not unmapped, (
        "name each as ``module`` in its package's __init__ docstring, with what it is for: "
        f"{unmapped}"
    )


def test_every_subpackage_is_named_in_its_parent_docstring() -> None:
    subpackages = [package for package in _packages() if package != PACKAGE_ROOT]
    unmapped = [
        str(package.relative_to(SOURCE_ROOT))
        for package in subpackages
        if f"{package.name}/" not in _named_in_docstring(package.parent)
    ]
    assert len(subpackages) > 10, f"too few sub-packages found under {PACKAGE_ROOT}"
    assert not unmapped, f"name each as ``package/`` in its parent's __init__ docstring: {unmapped}"
