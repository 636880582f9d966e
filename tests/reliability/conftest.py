"""Reliability tests share the e2e tests' tmux terminal fixture, and a cache of vLLM's flags."""

import json
from pathlib import Path

import pytest

from stepview.engine.own.engine_args import vllm_version
from tests.e2e.conftest import open_terminal

__all__ = ["open_terminal"]


@pytest.fixture
def option_cache(tmp_path: Path) -> Path:
    """A user cache directory holding vLLM's option names, as any run of stepview leaves it."""
    cache = tmp_path / "cache"
    (cache / "stepview").mkdir(parents=True)
    names = ["--model", "--max-num-seqs", "--dtype", "--enforce-eager", "--max-model-len"]
    (cache / "stepview" / f"vllm-options-{vllm_version()}.json").write_text(json.dumps(names))
    return cache
