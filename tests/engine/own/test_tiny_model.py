"""The demo model: built offline, deterministic, atomic, and rebuilt when broken."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from stepview.engine.own import tiny_model as demo_model
from stepview.engine.own.tiny_model import DEMO_ENGINE_DEFAULTS, ensure_tiny_model, recipe_hash

pytestmark = pytest.mark.engine


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_build_is_offline_deterministic_and_repaired_when_broken(
    tmp_path: Path, demo_model_path: Path
) -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    built = ensure_tiny_model(tmp_path)
    assert built == tmp_path / f"demo-model-{recipe_hash()}"
    # Nothing but the finished folder is left beside it (the temp dir was renamed into place).
    assert [p.name for p in tmp_path.iterdir()] == [built.name]

    # Same recipe, same bytes as the session's copy in the user cache dir.
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert _digest(built / name) == _digest(demo_model_path / name), name

    config = json.loads((built / "config.json").read_text())
    assert config["model_type"] == "qwen3"
    assert config["hidden_size"] == 128
    assert config["num_hidden_layers"] == 2
    assert config["num_attention_heads"] == 2
    assert config["num_key_value_heads"] == 1
    assert config["head_dim"] == 64
    assert config["tie_word_embeddings"] is True
    assert config["max_position_embeddings"] >= 2048
    assert 1500 <= config["vocab_size"] <= 4096
    tok_config = json.loads((built / "tokenizer_config.json").read_text())
    assert tok_config["eos_token"] and tok_config["bos_token"]

    # A second call finds it complete and returns it as it is: nothing built, nothing replaced.
    def files() -> dict[str, tuple[int, int]]:
        return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in [built, *built.iterdir()]}

    before = files()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(demo_model, "_build", lambda out, digest: pytest.fail("built again"))
        assert ensure_tiny_model(tmp_path) == built
    assert files() == before
    assert [p.name for p in tmp_path.iterdir()] == [built.name]

    # Broken copies are detected (cheap checks, no weights loaded)...
    digest = recipe_hash()
    (built / "model.safetensors").write_bytes(b"\0" * 16)
    assert not demo_model._is_complete(built, digest)
    # ...and rebuilt.
    assert ensure_tiny_model(tmp_path) == built
    assert demo_model._is_complete(built, digest)
    assert _digest(built / "model.safetensors") == _digest(demo_model_path / "model.safetensors")
    assert sorted(p.name for p in tmp_path.iterdir()) == [built.name]


def test_incomplete_builds_are_not_trusted(tmp_path: Path, demo_model_path: Path) -> None:
    digest = recipe_hash()
    assert demo_model._is_complete(demo_model_path, digest)
    assert not demo_model._is_complete(tmp_path / "missing", digest)
    assert not demo_model._is_complete(demo_model_path, "another-recipe")
    partial = tmp_path / "partial"
    partial.mkdir()
    for name in ("config.json", "tokenizer_config.json", "stepview-demo-model.json"):
        (partial / name).write_bytes((demo_model_path / name).read_bytes())
    assert not demo_model._is_complete(partial, digest)  # no weights, no tokenizer


def test_tokenizer_round_trips_text(demo_model_path: Path) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(demo_model_path / "tokenizer.json"))
    text = "def greet(name):\n    return f'hello {name}' # ünïcode ok\n"
    ids = tokenizer.encode(text).ids
    assert len(ids) < len(text)  # merges learned from Python source
    assert tokenizer.decode(ids) == text


def test_engine_defaults_are_small() -> None:
    # ~1 KiB of KV cache per token: 6 MiB holds fewer tokens than 32 seats of 512 need, so a
    # load can preempt (issue 12), and more than one full-length sequence, so vLLM starts.
    kv_bytes = DEMO_ENGINE_DEFAULTS["kv_cache_memory_bytes"]
    assert kv_bytes == 6 * 1024 * 1024
    assert 512 * 1024 < kv_bytes < 32 * 512 * 1024
    assert DEMO_ENGINE_DEFAULTS["enforce_eager"] is True
    assert DEMO_ENGINE_DEFAULTS["dtype"] == "float32"
    assert DEMO_ENGINE_DEFAULTS["max_model_len"] == 512
    assert DEMO_ENGINE_DEFAULTS["max_num_seqs"] == 32
