"""Fixtures for tests that run real vLLM on the tiny demo model (used by ``tests/conftest.py``).

The environment is set here, at import time, because vLLM reads it when first imported:
in-process engine core unless a test asks for a core process, no network, one OpenMP
thread, no torch.compile, torchvision blocked, and vLLM's logging sent to a file.

vLLM's engine shutdown tears down process-global state (the torch.distributed groups), so an
engine still alive after another one shut down breaks ("pipeline model parallel group is not
initialized"). :class:`EnginePool` therefore keeps at most one live engine per test process
and reuses it while the requested settings stay the same; tests are grouped by settings so
each engine is built once (~2 s each).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
# Every stepview the tests start runs the tiny model unless it names another: its text is noise
# but it loads in seconds. Tests about the real model ask for ``--model demo-smollm2``.
os.environ["STEPVIEW_DEMO_MODEL"] = "demo-tiny"

from stepview.engine.own.environment import prepare_vllm_environment

# One file per test process (xdist workers each have their own: ``gw0``, ``gw1``).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
VLLM_TEST_LOG = Path(tempfile.gettempdir()) / f"stepview-tests-vllm-{_WORKER}.log"
prepare_vllm_environment(VLLM_TEST_LOG)

from stepview.engine.own.tiny_model import TINY_MODEL_NAME, tiny_engine_args  # noqa: E402
from stepview.engine.own.vllm_engine import VllmEngine  # noqa: E402

# Fixtures that start vLLM: a test using one is marked ``engine`` (tests/conftest.py).
ENGINE_FIXTURES = frozenset({"engines", "demo_model_path"})


class EnginePool:
    """At most one live :class:`VllmEngine`, rebuilt only when the settings change."""

    def __init__(self) -> None:
        self._key: tuple[tuple[str, Any], ...] | None = None
        self._engine: VllmEngine | None = None
        self.phases: list[str] = []

    def get(self, *, multiprocess: bool = False, **overrides: Any) -> VllmEngine:
        """An idle engine built with ``tiny_engine_args(**overrides)``.

        ``multiprocess``: vLLM's engine core in a process of its own (~15 s to start, ~2 GB)
        instead of this one; keep such tests few.
        """
        key = (("multiprocess", multiprocess), *sorted(overrides.items()))
        engine = self._engine
        if engine is not None and key == self._key:
            if engine.has_unfinished():  # a failed test left requests behind
                ids = list(engine.llm_engine.output_processor.request_states)
                engine.llm_engine.abort_request(ids, internal=True)
                while engine.has_unfinished():
                    engine.step()
            return engine
        self.release()
        phases: list[str] = []
        engine = VllmEngine.create(
            tiny_engine_args(**overrides),
            demo_model=True,
            model_label=TINY_MODEL_NAME,
            on_phase=phases.append,
            multiprocess=multiprocess,
        )
        self._engine, self._key, self.phases = engine, key, phases
        return engine

    def release(self) -> None:
        """Shut the live engine down (before building a bare ``LLMEngine``, say)."""
        engine, self._engine, self._key = self._engine, None, None
        if engine is not None:
            engine.shutdown()


@pytest.fixture(scope="session")
def demo_model_path() -> Path:
    """The demo model in the user cache dir (built on first use, ~5 s)."""
    from stepview.engine.own.tiny_model import ensure_tiny_model

    return ensure_tiny_model()


@pytest.fixture(scope="session")
def engines(demo_model_path: Path) -> Iterator[EnginePool]:
    pool = EnginePool()
    yield pool
    pool.release()
