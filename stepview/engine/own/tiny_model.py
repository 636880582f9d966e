"""A tiny, self-made model so stepview runs anywhere: no download, no GPU, a few seconds to build.

The checkpoint is a real Qwen3-architecture model (so vLLM loads it through its normal code
path) with random weights from a fixed seed: its text is noise, but scheduling, chunked
prefill, preemption, sampling and logprobs are all real. The tokenizer is a byte-level BPE
trained with the ``tokenizers`` library on the source code of a fixed list of standard-library
modules, text every Python install has.

It is built once into the user cache directory, in a folder named after a hash of the recipe
(the constants below and the Python minor version, whose stdlib text trains the tokenizer), so
a changed recipe gets a fresh folder instead of a stale one. The build happens in a temporary
sibling folder that is renamed into place only when complete, and a marker file written last
tells a finished build from a crashed one; anything missing or unreadable triggers a rebuild.

vLLM's default ``torchvision``-importing paths are avoided by
:func:`stepview.engine.own.environment.block_broken_cpu_modules`, called before transformers is
imported here.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stepview.engine.own.environment import block_broken_cpu_modules
from stepview.engine.own.model_cache import ensure_built
from stepview.model.snapshot import TINY_MODEL_NAME as TINY_MODEL_NAME

if TYPE_CHECKING:
    import vllm


# Bump when the build changes in a way the constants below do not capture.
_RECIPE_VERSION = 1
_SEED = 1234
_VOCAB_SIZE = 2048
_MODEL_CONFIG: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    # The CPU attention backend rejects small head sizes (16 failed); 64 is supported.
    "head_dim": 64,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-6,
    "initializer_range": 0.02,
}
# Training text: the source of these stdlib modules (pure Python, present in every install).
_CORPUS_MODULES = (
    "argparse",
    "collections",
    "dataclasses",
    "difflib",
    "email.message",
    "functools",
    "inspect",
    "json.decoder",
    "logging",
    "pathlib",
    "textwrap",
    "typing",
)
_EOS = "<|endoftext|>"
_IM_START = "<|im_start|>"
_IM_END = "<|im_end|>"
_SPECIAL_TOKENS = (_EOS, _IM_START, _IM_END)
_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
_MARKER = "stepview-demo-model.json"
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")

# What makes the demo fast and small on a CPU (EngineArgs field -> value). The model needs
# ~1 KiB of KV cache per token, so 6 MiB holds ~6k tokens (48 blocks of 128): less than 32
# sequences of up to 512 tokens can use, on purpose. The demo is there to watch a scheduler at
# work, and with a cache that cannot hold every seat at full length a load (the dialog's
# defaults: 40 requests, 64-256 prompt and 64-128 output tokens) queues *and* preempts within
# seconds, as a busy GPU box does. (vLLM's default would zero-fill 92 % of free RAM.)
DEMO_ENGINE_DEFAULTS: dict[str, object] = {
    "kv_cache_memory_bytes": 6 * 1024 * 1024,
    "enforce_eager": True,
    "dtype": "float32",
    "max_model_len": 512,
    "max_num_seqs": 32,
    # Sampling with a seed per request is reproducible; this is vLLM's default, made explicit.
    "seed": 0,
    "served_model_name": [TINY_MODEL_NAME],
    # The weight loader's progress bar would draw on stderr, under the TUI.
    "use_tqdm_on_load": False,
}


def recipe_hash() -> str:
    """A short hash of everything that decides the demo model's files."""
    recipe = {
        "version": _RECIPE_VERSION,
        "seed": _SEED,
        "vocab": _VOCAB_SIZE,
        "config": _MODEL_CONFIG,
        "corpus": _CORPUS_MODULES,
        "special": _SPECIAL_TOKENS,
        "chat_template": _CHAT_TEMPLATE,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
    }
    blob = json.dumps(recipe, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def ensure_tiny_model(cache_dir: Path | None = None) -> Path:
    """Return the demo model's directory, building it first if missing or broken.

    ``cache_dir`` is the parent folder (default: the user cache dir); the model lives in
    ``demo-model-<recipe hash>`` below it (built by ``model_cache.ensure_built``).
    """
    digest = recipe_hash()
    return ensure_built(
        cache_dir,
        f"demo-model-{digest}",
        lambda path: _is_complete(path, digest),
        lambda out: _build(out, digest),
    )


def tiny_engine_args(**overrides: Any) -> vllm.EngineArgs:
    """``EngineArgs`` for the demo model with :data:`DEMO_ENGINE_DEFAULTS`; overrides win."""
    from vllm import EngineArgs

    kwargs: dict[str, Any] = {"model": str(ensure_tiny_model()), **DEMO_ENGINE_DEFAULTS}
    kwargs.update(overrides)
    return EngineArgs(**kwargs)


# -- validation ------------------------------------------------------------------------------


def _is_complete(path: Path, digest: str) -> bool:
    """True when ``path`` holds a finished build of this recipe whose files all parse.

    Cheap checks only (a few ms): the marker, the JSON files, the tokenizer, and the
    safetensors header; the weights themselves are not read.
    """
    try:
        marker = json.loads((path / _MARKER).read_text(encoding="utf-8"))
        if marker.get("recipe") != digest:
            return False
        for name in _REQUIRED_FILES:
            if (path / name).stat().st_size == 0:
                return False
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
        if config.get("model_type") != "qwen3":
            return False
        from tokenizers import Tokenizer

        Tokenizer.from_file(str(path / "tokenizer.json"))
        from safetensors import safe_open

        with safe_open(str(path / "model.safetensors"), framework="numpy") as weights:
            if not any(key.startswith("model.embed_tokens") for key in weights.keys()):  # noqa: SIM118
                return False
    except Exception:
        return False
    return True


# -- build -----------------------------------------------------------------------------------


def _corpus() -> list[str]:
    import importlib

    texts: list[str] = []
    for name in _CORPUS_MODULES:
        try:
            texts.append(inspect.getsource(importlib.import_module(name)))
        except (OSError, TypeError, ImportError):
            continue  # a stripped install without .py files: train on what there is
    if not texts:
        texts.append(_CHAT_TEMPLATE + " ".join(_CORPUS_MODULES))
    return texts


def _build_tokenizer(out: Path) -> int:
    """Train the byte-level BPE tokenizer and save it as a HF fast tokenizer; return vocab size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_VOCAB_SIZE,
        special_tokens=list(_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer.save(str(out / "tokenizer.json"))
    added = {
        str(tokenizer.token_to_id(tok)): {
            "content": tok,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for tok in _SPECIAL_TOKENS
    }
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": _EOS,
        "eos_token": _EOS,
        "pad_token": _EOS,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": _MODEL_CONFIG["max_position_embeddings"],
        "added_tokens_decoder": added,
        "chat_template": _CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config, indent=2), encoding="utf-8"
    )
    (out / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": _EOS, "eos_token": _EOS, "pad_token": _EOS}, indent=2),
        encoding="utf-8",
    )
    return int(tokenizer.get_vocab_size())


def _build(out: Path, digest: str) -> None:
    block_broken_cpu_modules()
    start = time.perf_counter()
    vocab = _build_tokenizer(out)

    import importlib

    import torch
    from tokenizers import Tokenizer

    # transformers' own annotations are partial; treat the module as untyped.
    transformers: Any = importlib.import_module("transformers")
    hf_logging: Any = importlib.import_module("transformers.utils.logging")

    eos_id = Tokenizer.from_file(str(out / "tokenizer.json")).token_to_id(_EOS)
    config = transformers.Qwen3Config(
        vocab_size=max(vocab, _VOCAB_SIZE),
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
        **_MODEL_CONFIG,
    )
    config.architectures = ["Qwen3ForCausalLM"]
    torch.manual_seed(_SEED)
    model = transformers.Qwen3ForCausalLM(config).to(torch.float32)
    model.eval()
    # save_pretrained draws a tqdm bar on stderr; the TUI may already own the terminal.
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(str(out), safe_serialization=True)
    finally:
        if bars_were_on:
            hf_logging.enable_progress_bar()
    # Written last: its presence means every file above is complete.
    (out / _MARKER).write_text(
        json.dumps(
            {
                "recipe": digest,
                "name": TINY_MODEL_NAME,
                "built_seconds": round(time.perf_counter() - start, 3),
            }
        ),
        encoding="utf-8",
    )
