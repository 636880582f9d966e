"""vLLM's ``llm_engine_example`` loop, bare, on a model folder: the reference stepview must equal.

Run as ``python -m tests.engine.own.seed_loop MODEL_DIR PROMPTS_JSON``: builds a plain
``LLMEngine`` with the built-in SmolLM2's engine defaults (the ones stepview runs it with),
adds one prompt per step as the example does, and prints one JSON object: each request id to
the token ids of each of its completions, by index, and their finish reasons. A child process
of its own, because vLLM's engine shutdown tears down process-global state that a second
engine in the same process (stepview's) would need.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any


def main(model_dir: str, prompts_json: str) -> None:
    from stepview.engine.own.environment import prepare_vllm_environment

    prepare_vllm_environment(Path(tempfile.gettempdir()) / "stepview-seed-loop-vllm.log")
    from vllm import EngineArgs, LLMEngine, SamplingParams

    from stepview.engine.own.smollm2 import engine_defaults

    engine = LLMEngine.from_engine_args(EngineArgs(model=model_dir, **engine_defaults()))  # type: ignore[arg-type]
    pending: list[tuple[str, dict[str, Any]]] = [
        (p["prompt"], p["params"]) for p in json.loads(prompts_json)
    ]
    got: dict[str, dict[str, Any]] = {}
    request_id = 0
    try:
        while pending or engine.has_unfinished_requests():
            if pending:
                prompt, params = pending.pop(0)
                engine.add_request(str(request_id), prompt, SamplingParams(**params))
                request_id += 1
            for out in engine.step():
                # n > 1: each sample arrives on its own; keep each index's latest.
                for completion in out.outputs:
                    entry = got.setdefault(out.request_id, {})
                    entry[str(completion.index)] = {
                        "token_ids": list(completion.token_ids),
                        "finish_reason": completion.finish_reason,
                    }
    finally:
        engine.engine_core.shutdown()
    print(json.dumps(got))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
