"""The built-in SmolLM2's dtype follows the CPU (issue 28): bfloat16 only where the CPU
computes it natively, as vLLM's CPU platform decides for its own bf16 kernels; float32
elsewhere, where torch's bf16 fallback made a step of the demo 227 ms on an AVX2-only CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from stepview.engine.own.smollm2 import SMOLLM2_ENGINE_DEFAULTS, engine_defaults, engine_dtype

pytestmark = pytest.mark.engine


@pytest.mark.parametrize(
    ("native", "dtype", "kv_scale"), [(True, "bfloat16", 1), (False, "float32", 2)]
)
def test_bf16_only_where_the_cpu_computes_it_and_the_kv_cache_holds_as_many_tokens(
    monkeypatch: pytest.MonkeyPatch, native: bool, dtype: str, kv_scale: int
) -> None:
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native)
    assert engine_dtype() == dtype
    kv_bytes = SMOLLM2_ENGINE_DEFAULTS["kv_cache_memory_bytes"]
    assert isinstance(kv_bytes, int)
    assert engine_defaults() == {
        **SMOLLM2_ENGINE_DEFAULTS,
        "dtype": dtype,
        "kv_cache_memory_bytes": kv_bytes * kv_scale,  # a float32 token takes twice the bytes
    }
    assert SMOLLM2_ENGINE_DEFAULTS["dtype"] == "bfloat16"  # the checkpoint's, unchanged


def test_this_machine_gets_what_its_cpu_says() -> None:
    flags = Path("/proc/cpuinfo").read_text().split()
    assert engine_dtype() == ("bfloat16" if "avx512_bf16" in flags else "float32")
