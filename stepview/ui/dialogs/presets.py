"""Form presets: the seed example's three parameter sets and vLLM's defaults.

vLLM's ``llm_engine_example.py`` exercises three parameter sets (greedy with logprobs,
top-k with a presence penalty, two top-p samples with a frequency penalty). They are the
quickest way to see what each setting does to scheduling, so the form offers them, and an
empty prompt gets the prompt the example pairs with them. The data itself lives in
:mod:`stepview.model.prompts`, shared with the headless runner.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepview.model.prompts import SEED_PROMPTS
from stepview.model.sampling import SamplingSpec


@dataclass(frozen=True, slots=True)
class Preset:
    """A named parameter set, with the prompt the seed example pairs it with."""

    key: str
    label: str
    spec: SamplingSpec
    prompt: str = ""


_SEED_LABELS = (("greedy", "greedy lp1"), ("topk", "top-k 5"), ("n2", "n=2 top-p"))

PRESETS: tuple[Preset, ...] = (
    *(
        Preset(key, label, spec, prompt)
        for (key, label), (prompt, spec) in zip(_SEED_LABELS, SEED_PROMPTS, strict=True)
    ),
    Preset("defaults", "defaults", SamplingSpec()),
)
