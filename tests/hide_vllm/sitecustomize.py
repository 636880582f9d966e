"""With this folder on ``PYTHONPATH``, no Python process can import vLLM, torch or transformers.

Python imports ``sitecustomize`` at start-up from the path, so every process of a test run gets
it: pytest itself and each ``stepview`` a test starts. The quick loop (``./test.sh --quick``)
runs that way, which proves two things at once: a test that needs vLLM and is not marked
``engine`` fails at once (instead of making the quick loop slow), and the parts of stepview that
promise to run without vLLM (replay, the UI on a fake engine, ``--attach``) really do.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

HIDDEN = frozenset({"vllm", "torch", "transformers"})


class _Hidden(MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (hidden by tests/hide_vllm: this process runs as "
                "if vLLM were not installed; a test that needs it is marked 'engine')",
                name=fullname,
            )
        return None


sys.meta_path.insert(0, _Hidden())
