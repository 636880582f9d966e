"""Run the real ``stepview`` command in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest


def stepview_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        PYTHONUNBUFFERED="1",
    )
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    return env


@pytest.fixture
def run_stepview(tmp_path: Path):  # type: ignore[no-untyped-def]
    """``run_stepview(args, timeout=...)`` -> CompletedProcess with text stdout/stderr."""

    def run(args: Sequence[str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "stepview", "--log-file", str(tmp_path / "log.txt"), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=stepview_env(tmp_path),
            cwd=tmp_path,
        )

    return run
