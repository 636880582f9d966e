"""The UI, the plain-data model and the metrics never pull in vLLM or torch.

Importing vLLM takes seconds and gigabytes; the TUI must draw its first frame before that,
and a replay must work on a laptop without vLLM installed. A fresh interpreter proves it,
since this test process may already have imported anything.
"""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import importlib, pkgutil, sys
import stepview.metrics, stepview.model, stepview.ui
for package in (stepview.metrics, stepview.model, stepview.ui):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(info.name)
heavy = sorted(
    name for name in sys.modules
    if name.split(".")[0] in {"vllm", "torch", "transformers"}
    or name == "stepview.engine.own.vllm_engine"
)
print(",".join(heavy))
"""


def test_ui_model_and_metrics_import_no_vllm_or_torch() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == ""
