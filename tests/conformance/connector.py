"""A KV connector with no store behind it, so that a rig's scheduler meets remote KV loads.

vLLM's scheduler treats a request as loading its KV cache asynchronously when the connector
says so (``get_num_new_matched_tokens`` answers ``load_kv_async=True``): it takes KV blocks,
waits in ``WAITING_FOR_REMOTE_KVS`` until a step's runner output lists it in
``finished_recving``, and, from vLLM 0.34 with ``max_num_inflight_kv_loads``, queues apart
(``async_kv_waiting``) and stops at the in-flight load cap. No real connector can run here (no
remote engine, no GPU), so this one plays a store that holds every full block of the prompt of
each request whose id starts with :data:`LOADS`; :class:`~tests.conformance.rig.Rig` reports
each load done in the runner output of the step that started it, as a worker would once the
bytes were in. Nothing else differs: the worker-side methods do nothing, no KV is moved.
"""

from __future__ import annotations

from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
)

LOADS = "load"
"""Requests whose id starts with this have their prompt in the store (all full blocks)."""


class FakeConnector(KVConnectorBase_V1):
    """The scheduler side of a KV connector whose store holds the prompts of ``load*``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started: list[str] = []  # loads started since the rig last took them

    # The worker side: never called without workers.
    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        pass

    def wait_for_layer_load(self, layer_name: str) -> None:
        pass

    def save_kv_layer(self, *args: Any, **kwargs: Any) -> None:
        pass

    def wait_for_save(self) -> None:
        pass

    # The scheduler side.
    def may_load_async(self, request: Any) -> bool:
        """0.34's question on entering the waiting queues: may this one load asynchronously."""
        return str(request.request_id).startswith(LOADS)

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> Any:
        if not self.may_load_async(request):
            return 0, False
        size = self._vllm_config.cache_config.block_size
        # Full blocks only, and never the last prompt token (the step must compute one).
        hit = (request.num_prompt_tokens - 1) // size * size - num_computed_tokens
        return (hit, True) if hit > 0 else (0, False)

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        if num_external_tokens:
            self.started.append(request.request_id)

    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
        return KVConnectorMetadata()

    def take_started(self) -> set[str]:
        """The loads started since the last call: the rig reports them done."""
        started, self.started = set(self.started), []
        return started
