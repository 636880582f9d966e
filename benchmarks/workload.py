"""The seeded workload the engine benchmarks run, and the environment they run it under.

One definition for ``engine_overhead.py``, ``core_cpu.py`` and ``capture_cost.py``: their
figures are only comparable if they measure the same work on the same settings.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

from stepview.model.sampling import SamplingSpec

# Same for every variant, forced (not defaults): one OpenMP thread, no hub, no torch.compile
# (see the platform notes for why each matters on 2 cores). Where the engine core runs is
# set per variant (:func:`mode_env`).
BENCH_ENV = {
    "OMP_NUM_THREADS": "1",
    "HF_HUB_OFFLINE": "1",
    "TORCH_COMPILE_DISABLE": "1",
    # The tiny random-weight model, as in every figure in docs/performance.md: the cost of
    # watching shows best beside the cheapest steps.
    "STEPVIEW_DEMO_MODEL": "demo-tiny",
}
CHILD_TIMEOUT_S = 300.0  # one engine run, start to stop
POLL_S = 0.05  # how often a parent looks at a child's progress

# Prompt words (noise to the random-weight demo model either way).
_TEXT = (
    "the engine steps tokens in a batch while requests wait their turn for the cache and "
    "every prompt is scheduled then prefilled then decoded until it reaches its length or "
    "a stop token robot may not injure a human being to be or not what is meaning of life"
)
_WORDS = _TEXT.split()


def workload(count: int, max_tokens: int, seed: int = 1234) -> list[tuple[str, SamplingSpec]]:
    """``count`` prompts with a fixed mix of sampling parameters, all seeded (reproducible).

    The mix follows vLLM's example (greedy with logprobs and prompt logprobs; top-k with a
    presence penalty; n=2 with top-p) and adds plain sampling, logprobs=5 and n=2 with
    logprobs, so the per-step work of every output path is in it.
    """
    rng = random.Random(seed)
    mix = (
        {"temperature": 0.0, "logprobs": 1, "prompt_logprobs": 1},
        {"temperature": 0.8, "top_k": 5, "presence_penalty": 0.2},
        {"n": 2, "temperature": 0.8, "top_p": 0.95, "frequency_penalty": 0.1},
        {"temperature": 0.0},
        {"temperature": 1.0, "logprobs": 5},
        {"n": 2, "temperature": 0.7, "logprobs": 2},
        {"temperature": 0.9, "top_p": 0.9, "min_p": 0.05},
        {"temperature": 0.6, "repetition_penalty": 1.1},
    )
    requests = []
    for i in range(count):
        words = rng.choices(_WORDS, k=rng.randint(4, 48))
        params = {**mix[i % len(mix)], "max_tokens": max_tokens, "seed": 1000 + i}
        requests.append((" ".join(words), SamplingSpec.from_dict(params)))
    return requests


def write_workload(path: Path, requests: Sequence[tuple[str, SamplingSpec]]) -> None:
    """A stepview prompts file (what ``--prompts`` reads)."""
    with path.open("w", encoding="utf-8") as out:
        for i, (prompt, spec) in enumerate(requests):
            line = {"id": f"b{i}", "prompt": prompt, "params": spec.to_dict()}
            out.write(json.dumps(line) + "\n")
