"""Run the real ``stepview`` command in a subprocess, as a user would."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.e2e.terminal import command_env


@pytest.fixture
def run_stepview(tmp_path: Path):  # type: ignore[no-untyped-def]
    """``run_stepview(args, timeout=...)`` -> CompletedProcess with text stdout/stderr."""

    def run(args: Sequence[str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "stepview", "--log-file", str(tmp_path / "log.txt"), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=command_env(),
            cwd=tmp_path,
        )

    return run
