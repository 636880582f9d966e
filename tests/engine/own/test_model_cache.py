"""A built-in model's build killed outright leaves nothing behind once the next build runs.

The builds here are stand-ins (a file written, then a wait): what is under test is the cache's
bookkeeping, which is the same for the tiny model and SmolLM2's conversion (hundreds of MB,
~20 s, so often killed half way by an impatient Ctrl+C or a systemd restart).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stepview.engine.own.model_cache import STALE_AFTER_S, clear_stale, ensure_built

# A build that writes part of a model, says so, and never ends (until it is killed).
BUILDER = """
import sys, threading
from pathlib import Path
from stepview.engine.own.model_cache import ensure_built

def build(tmp):
    (tmp / "weights").write_bytes(bytes(1 << 20))
    print("building", flush=True)
    threading.Event().wait()

ensure_built(Path(sys.argv[1]), "model", lambda path: (path / "done").exists(), build)
"""


def is_complete(path: Path) -> bool:
    return (path / "done").exists()


def build(tmp: Path) -> None:
    (tmp / "weights").write_bytes(b"w")
    (tmp / "done").write_text("")


@pytest.fixture
def builder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another stepview process, building ``model`` in ``tmp_path`` and held there."""
    child = subprocess.Popen(
        [sys.executable, "-c", BUILDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "building\n"
    yield child
    child.kill()
    child.wait()


def names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_a_build_killed_outright_is_cleared_by_the_next(
    tmp_path: Path, builder: subprocess.Popen[str]
) -> None:
    builder.kill()
    builder.wait()
    (left,) = names(tmp_path)  # the killed build could not remove its folder
    assert left.startswith(".model.") and left.endswith(".tmp")
    assert ensure_built(tmp_path, "model", is_complete, build) == tmp_path / "model"
    assert names(tmp_path) == ["model"]


def test_a_live_build_is_left_alone_and_cleared_once_its_process_is_gone(
    tmp_path: Path, builder: subprocess.Popen[str]
) -> None:
    (theirs,) = names(tmp_path)
    ensure_built(tmp_path, "model", is_complete, build)  # ours finishes first
    assert names(tmp_path) == [theirs, "model"]
    builder.kill()
    builder.wait()
    ensure_built(tmp_path, "model", is_complete, build)  # complete: nothing built, but cleared
    assert names(tmp_path) == ["model"]


def test_a_folder_older_than_any_build_goes_whatever_its_process_id_says(
    tmp_path: Path,
) -> None:
    """A process id can be used again by an unrelated process; and a folder named by an
    earlier stepview (no process id) is told only by its age."""
    alive = os.getppid()
    old = time.time() - STALE_AFTER_S - 60
    for name in (f".model.{alive}.x1.tmp", ".model.x2.tmp", f".model.{alive}.x3.tmp", ".b.x4.tmp"):
        (tmp_path / name).mkdir()
    for name in (f".model.{alive}.x1.tmp", ".model.x2.tmp"):
        os.utime(tmp_path / name, (old, old))
    (tmp_path / "model").mkdir()  # a built model is never touched, however old
    os.utime(tmp_path / "model", (old, old))
    cleared = clear_stale(tmp_path)
    assert sorted(path.name for path in cleared) == [f".model.{alive}.x1.tmp", ".model.x2.tmp"]
    assert names(tmp_path) == [".b.x4.tmp", f".model.{alive}.x3.tmp", "model"]
