"""The import-linter contracts in pyproject.toml hold, and each fails when its wall is broken.

A contract that can never fail guards nothing, so each break below is made in a copy of the
package (one import added where it must not be) and ``lint-imports`` must name the contract it
breaks. The real tree is checked by ``./test.sh`` itself (``lint-imports`` runs before pytest).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# (module that gets the import, from stepview/, the import, words of the contract that must fail)
BREAKS = [
    ("engine/watch/link/attached.py", "import vllm", "Only the scheduler plug-in"),
    ("engine/watch/link/attached.py", "import stepview.engine.own.vllm_engine", "watching client"),
    ("engine/plugin/capture.py", "import stepview.engine.driver.loop", "inside vLLM's engine"),
    ("engine/driver/ledger.py", "import stepview.engine.watch.link.attached", "serve any engine"),
    ("model/snapshot.py", "import stepview.trace.format", "Plain data (model)"),
    ("ui/display.py", "import stepview.engine.driver.loop", "The UI never imports"),
    ("ui/display.py", "import stepview.testing.snapshots", "Test doubles"),
    ("files/records.py", "import textual", "files a run writes"),
    ("metrics/waiting.py", "import stepview.engine.driver.loop", "Metrics read snapshots"),
    ("metrics/exporter.py", "import vllm", "Only the scheduler plug-in"),
    ("model/grow.py", "import stepview.model.snapshot", "No import cycle"),
    ("launch/help.py", "import stepview.cli.args", "never the command line"),
    ("cli/args.py", "import stepview.launch.exits", "command line's dispatcher imports"),
    ("cli/conflicts.py", "import stepview.launch.exits", "command line's dispatcher imports"),
    ("../benchmarks/overhead_measurement.py", "import benchmarks.overhead_runs", "benchmarks/"),
]


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(tree / "pyproject.toml")],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("layers")
    for package in ("stepview", "benchmarks"):  # the contracts' two roots
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_tree_keeps_every_contract(pristine: Path) -> None:
    done = _lint(pristine)
    assert done.returncode == 0, done.stdout[-3000:]
    assert " broken" in done.stdout and "0 broken" in done.stdout


@pytest.mark.parametrize(("module", "line", "contract"), BREAKS, ids=[b[0] for b in BREAKS])
def test_each_wall_fails_when_broken(pristine: Path, module: str, line: str, contract: str) -> None:
    path = pristine / "stepview" / module
    original = path.read_text(encoding="utf-8")
    # After the module docstring and ``from __future__``: any top-level import will do.
    marker = "from __future__ import annotations\n"
    assert marker in original, module
    path.write_text(original.replace(marker, f"{marker}\n{line}  # noqa\n", 1), encoding="utf-8")
    try:
        done = _lint(pristine)
    finally:
        path.write_text(original, encoding="utf-8")
    assert done.returncode == 1, done.stdout[-3000:]
    broken = done.stdout.split("Broken contracts", 1)[-1]
    assert contract in " ".join(broken.split()), broken[:3000]
